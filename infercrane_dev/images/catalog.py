"""The node's images as data: what each one holds and how it starts.

One row per image, one row per layer. Layers are shared between rows on purpose: the same
entries make the same bytes, so the stand-in binary's layer is stored once by containerd for
all three stand-in images. Nothing here reads a file or knows the archive format.
"""

from __future__ import annotations

from dataclasses import dataclass

REPOSITORY_PREFIX = "infercrane.local/standins"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STANDIN_PATH = "/usr/local/bin/infercrane-standin"


@dataclass(frozen=True)
class Directory:
    path: str
    mode: int = 0o755


@dataclass(frozen=True)
class Executable:
    """A file copied from the tools bin dir (``binary`` names it there)."""

    path: str
    binary: str


@dataclass(frozen=True)
class Symlink:
    path: str
    target: str


Entry = Directory | Executable | Symlink


@dataclass(frozen=True)
class Layer:
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class ImageSpec:
    """``entrypoint`` None: the image has neither ENTRYPOINT nor CMD (a Pod's command decides)."""

    name: str
    layers: tuple[Layer, ...]
    entrypoint: tuple[str, ...] | None

    @property
    def repository(self) -> str:
        return f"{REPOSITORY_PREFIX}/{self.name}"


# The mount points runc expects and the directories the links live in; /tmp is writable by
# anyone, as on a real distribution image, and /dev is where the kubelet's termination-log
# file is mounted.
ROOTFS = Layer(
    (
        Directory("dev"),
        Directory("etc"),
        Directory("proc"),
        Directory("sys"),
        Directory("tmp", 0o1777),
        Directory("usr"),
        Directory("usr/bin"),
        Directory("usr/local"),
        Directory("usr/local/bin"),
    )
)
PAUSE = Layer((Executable("pause", "infercrane-pause"),))
STANDIN = Layer((Executable(STANDIN_PATH.lstrip("/"), "infercrane-standin"),))
# The current vLLM image has both commands; the stand-in dispatches on the name it was run as.
VLLM_COMMANDS = Layer(
    (
        Symlink("usr/bin/python3", STANDIN_PATH),
        Symlink("usr/local/bin/vllm", "infercrane-standin"),
    )
)
PYTHON_COMMAND = Layer((Symlink("usr/bin/python3", STANDIN_PATH),))

IMAGES = (
    ImageSpec("pause", (ROOTFS, PAUSE), ("/pause",)),
    ImageSpec("vllm-openai-standin", (ROOTFS, STANDIN, VLLM_COMMANDS), ("vllm", "serve")),
    ImageSpec(
        "vllm-openai-legacy-standin",
        (ROOTFS, STANDIN, VLLM_COMMANDS),
        ("python3", "-m", "vllm.entrypoints.openai.api_server"),
    ),
    # For custom workloads (SGLang and the like), whose Pods carry their whole command.
    ImageSpec("runtime-standin", (ROOTFS, STANDIN, PYTHON_COMMAND), None),
)


def binaries() -> tuple[str, ...]:
    """The tools-bin-dir files the images are made of."""
    return tuple(
        sorted(
            {
                entry.binary
                for image in IMAGES
                for layer in image.layers
                for entry in layer.entries
                if isinstance(entry, Executable)
            }
        )
    )
