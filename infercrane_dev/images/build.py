"""Build the catalog's images from the tools bin dir into OCI archives that containerd imports.

The binaries come from ``hack/tools/build.sh`` (family ``infercrane-node``); this module only
finds and packs them, and never builds, pulls or pushes anything. The images' tag is the
version stamped into those binaries, read back from ``infercrane-pause --version``.
:func:`build_image` packs one image of any catalog under a given name and tag, with the files
of pinned Debian packages where its entries ask for them (:mod:`.debs`).
"""

from __future__ import annotations

import os
import platform
import subprocess
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import debs
from .catalog import (
    IMAGES,
    Directory,
    Entry,
    Executable,
    ImageSpec,
    Packaged,
    Symlink,
    Text,
    Tree,
)
from .ocilayout import Member, Platform, image_archive, tar_bytes

EXECUTABLE_MODE = 0o755
SYMLINK_MODE = 0o777
# Go's names for the machine, which the binaries were built for.
_ARCHITECTURES = {"x86_64": "amd64", "aarch64": "arm64"}


class ImageBuildError(RuntimeError):
    """An image could not be built (a binary is missing or says nothing sensible)."""


@dataclass(frozen=True)
class Sources:
    """Where entries' files come from: the tools bin dir, fetched pinned packages, and
    directories prepared before the build."""

    bin_dir: Path
    debs: Mapping[str, Path] = field(default_factory=dict)  # package name -> its .deb
    trees: Mapping[str, Path] = field(default_factory=dict)  # Tree.tree -> its directory


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
    return [
        build_image(spec, Sources(bin_dir), name=spec.repository, tag=tag, out_dir=out_dir)
        for spec in IMAGES
    ]


def build_image(
    spec: ImageSpec,
    sources: Sources,
    *,
    name: str,
    tag: str,
    out_dir: Path,
    docker_manifest: bool = False,
) -> BuiltImage:
    """Write ``<out_dir>/<spec.name>.oci.tar``: ``spec`` as the image ``name:tag``."""
    layers = [layer_tar(layer.entries, sources) for layer in spec.layers]
    archive, digest = image_archive(
        layers,
        platform=host_platform(),
        container_config=_container_config(spec),
        name=name,
        tag=tag,
        docker_manifest=docker_manifest,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{spec.name}.oci.tar"
    _write_atomically(path, archive)
    return BuiltImage(name=name, tag=tag, digest=digest, archive=path)


def _container_config(spec: ImageSpec) -> dict[str, Any]:
    config: dict[str, Any] = {"Env": list(spec.env)}
    if spec.entrypoint is not None:
        config["Entrypoint"] = list(spec.entrypoint)
    if spec.user is not None:
        config["User"] = spec.user
    return config


def layer_tar(entries: Sequence[Entry], sources: Sources) -> bytes:
    """One layer's reproducible tar of ``entries``; a path given twice is refused unless both
    are the same directory (two packages' shared one): which of two a runtime would keep is not
    for a catalog to leave open."""
    members = list(
        dict.fromkeys(member for entry in entries for member in _members(entry, sources))
    )
    counted = Counter(member.path for member in members)
    twice = sorted(path for path, count in counted.items() if count > 1)
    if twice:
        raise ImageBuildError(f"paths given twice in one layer: {', '.join(twice)}")
    return tar_bytes(members)


def _members(entry: Entry, sources: Sources) -> list[Member]:
    match entry:
        case Directory(path=path, mode=mode):
            return [Member(path, mode)]
        case Executable(path=path, binary=binary):
            source = sources.bin_dir / binary
            try:
                return [Member(path, EXECUTABLE_MODE, source.read_bytes())]
            except OSError as missing:
                raise ImageBuildError(f"{source}: {missing.strerror}; run `make tools`") from None
        case Symlink(path=path, target=target):
            return [Member(path, SYMLINK_MODE, link=target)]
        case Text(path=path, content=content, mode=mode):
            return [Member(path, mode, content.encode())]
        case Packaged(package=package, patterns=patterns):
            if package not in sources.debs:
                raise ImageBuildError(f"package {package} was not fetched for this image")
            try:
                return debs.files(sources.debs, package, patterns)
            except debs.DebError as failed:
                raise ImageBuildError(str(failed)) from None
        case Tree(path=path, tree=tree):
            if tree not in sources.trees:
                raise ImageBuildError(f"directory {tree} was not prepared for this image")
            return _tree_members(sources.trees[tree], path)


def _tree_members(root: Path, under: str) -> list[Member]:
    """A directory's contents under ``under``: its directories, its files (0755 when the owner
    may execute them, else 0644, as modes of a checkout are normalised) and its links."""
    members = []
    for found in sorted(root.rglob("*")):
        path = f"{under}/{found.relative_to(root).as_posix()}"
        if found.is_symlink():
            members.append(Member(path, SYMLINK_MODE, link=os.readlink(found)))
        elif found.is_dir():
            members.append(Member(path, 0o755))
        else:
            mode = EXECUTABLE_MODE if found.stat().st_mode & 0o100 else 0o644
            members.append(Member(path, mode, found.read_bytes()))
    return members


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
