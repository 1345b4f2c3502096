"""The node's images as data: what each one holds and how it starts.

One row per image, one row per layer. Layers are shared between rows on purpose: the same
entries make the same bytes, so the stand-in binary's layer is stored once by containerd for
all three stand-in images. Nothing here reads a file or knows the archive format. The entry
types also serve other catalogs of the same builder (``infercrane_dev/kind``'s Kubernetes
images, the runner image): a file of given text, files taken from a pinned Debian package, and
a directory prepared before the build.
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


@dataclass(frozen=True)
class Text:
    path: str
    content: str
    mode: int = 0o644


@dataclass(frozen=True)
class Packaged:
    """The files of a pinned Debian package (``debs.DebPin``) whose paths match ``patterns``
    (fnmatch, absolute), kept where the package puts them."""

    package: str
    patterns: tuple[str, ...]


@dataclass(frozen=True)
class Tree:
    """The files of a directory prepared before the build (``Sources.trees[tree]``, such as a
    ``pip install --target``), kept under ``path`` with their links and executable bits."""

    path: str
    tree: str


Entry = Directory | Executable | Symlink | Text | Packaged | Tree


@dataclass(frozen=True)
class Layer:
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class ImageSpec:
    """``entrypoint`` None: the image has neither ENTRYPOINT nor CMD (a Pod's command decides).
    ``user`` None: no USER (root), as every stand-in."""

    name: str
    layers: tuple[Layer, ...]
    entrypoint: tuple[str, ...] | None
    env: tuple[str, ...] = (PATH_ENV,)
    user: str | None = None

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
# The non-root user an image runs as: uid and gid 65532, as distroless images name theirs.
ACCOUNT_ID = 65532


def account(name: str, home: str) -> Layer:
    """``/etc/passwd`` and ``/etc/group`` holding root and ``name`` (``ACCOUNT_ID``), and its
    home directory, ``home`` (relative), which a program that looks itself up finds."""
    user = f"{name}:x:{ACCOUNT_ID}:{ACCOUNT_ID}::/{home}:/sbin/nologin"
    return Layer(
        (
            Text("etc/passwd", f"root:x:0:0:root:/root:/sbin/nologin\n{user}\n"),
            Text("etc/group", f"root:x:0:\n{name}:x:{ACCOUNT_ID}:\n"),
            *(Directory("/".join(home.split("/")[: i + 1])) for i in range(home.count("/") + 1)),
        )
    )


STANDIN = Layer((Executable(STANDIN_PATH.lstrip("/"), "infercrane-standin"),))
# The current vLLM image has both commands; the stand-in dispatches on the name it was run as.
VLLM_COMMANDS = Layer(
    (
        Symlink("usr/bin/python3", STANDIN_PATH),
        Symlink("usr/local/bin/vllm", "infercrane-standin"),
    )
)
PYTHON_COMMAND = Layer((Symlink("usr/bin/python3", STANDIN_PATH),))
DEVICE_PLUGIN_PATH = "/usr/local/bin/infercrane-gpu-device-plugin"
DEVICE_PLUGIN = Layer((Executable(DEVICE_PLUGIN_PATH.lstrip("/"), "infercrane-gpu-device-plugin"),))

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
    # NVIDIA's device plugin's stand-in, for a cluster that runs it as a DaemonSet (Kind).
    ImageSpec("gpu-device-plugin", (ROOTFS, DEVICE_PLUGIN), (DEVICE_PLUGIN_PATH,)),
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
