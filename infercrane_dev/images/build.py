"""Build the catalog's images from the tools bin dir into OCI archives that containerd imports.

The binaries come from ``hack/tools/build.sh`` (family ``infercrane-node``); this module only
finds and packs them, and never builds, pulls or pushes anything. The images' tag is the
version stamped into those binaries, read back from ``infercrane-pause --version``.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import IMAGES, PATH_ENV, Directory, Executable, ImageSpec, Layer, Symlink
from .ocilayout import Member, Platform, image_archive, tar_bytes

EXECUTABLE_MODE = 0o755
SYMLINK_MODE = 0o777
# Go's names for the machine, which the binaries were built for.
_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64"}


class ImageBuildError(RuntimeError):
    """An image could not be built (a binary is missing or says nothing sensible)."""


@dataclass(frozen=True)
class BuiltImage:
    name: str  # the repository, infercrane.local/standins/<image>
    tag: str
    digest: str  # the manifest's, sha256:…
    archive: Path

    @property
    def reference(self) -> str:
        """The digest-pinned reference a Pod spec uses."""
        return f"{self.name}@{self.digest}"


def host_platform() -> Platform:
    machine = platform.machine()
    if machine not in _ARCHITECTURES:
        raise ImageBuildError(f"no Go architecture known for machine {machine!r}")
    return Platform(os="linux", architecture=_ARCHITECTURES[machine])


def binaries_version(bin_dir: Path) -> str:
    """The version build.sh stamped into the infercrane-node binaries."""
    pause = bin_dir / "infercrane-pause"
    try:
        out = subprocess.run(
            [str(pause), "--version"], check=True, capture_output=True, text=True, timeout=10
        ).stdout.split()
    except (OSError, subprocess.SubprocessError) as failed:
        raise ImageBuildError(f"{pause}: cannot read its version: {failed}") from failed
    if len(out) != 2 or out[0] != "infercrane-pause" or out[1] == "dev":
        raise ImageBuildError(f"{pause}: not a build.sh-stamped binary (--version said {out})")
    return out[1]


def build_images(bin_dir: Path, out_dir: Path) -> list[BuiltImage]:
    """Write ``<out_dir>/<image>.oci.tar`` for every catalog image."""
    tag = binaries_version(bin_dir)
    target = host_platform()
    out_dir.mkdir(parents=True, exist_ok=True)
    built = []
    for spec in IMAGES:
        layers = [_layer_tar(layer, bin_dir) for layer in spec.layers]
        archive, digest = image_archive(
            layers,
            platform=target,
            container_config=_container_config(spec),
            name=spec.repository,
            tag=tag,
        )
        path = out_dir / f"{spec.name}.oci.tar"
        _write_atomically(path, archive)
        built.append(BuiltImage(name=spec.repository, tag=tag, digest=digest, archive=path))
    return built


def _container_config(spec: ImageSpec) -> dict[str, Any]:
    config: dict[str, Any] = {"Env": [PATH_ENV]}
    if spec.entrypoint is not None:
        config["Entrypoint"] = list(spec.entrypoint)
    return config


def _layer_tar(layer: Layer, bin_dir: Path) -> bytes:
    return tar_bytes(_member(entry, bin_dir) for entry in layer.entries)


def _member(entry: Directory | Executable | Symlink, bin_dir: Path) -> Member:
    match entry:
        case Directory(path=path, mode=mode):
            return Member(path, mode)
        case Executable(path=path, binary=binary):
            source = bin_dir / binary
            try:
                return Member(path, EXECUTABLE_MODE, source.read_bytes())
            except OSError as missing:
                raise ImageBuildError(f"{source}: {missing.strerror}; run `make tools`") from None
        case Symlink(path=path, target=target):
            return Member(path, SYMLINK_MODE, link=target)


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
