"""Byte-reproducible OCI image-layout archives, written without a registry or a container tool.

Everything that could differ between two builds of the same files is fixed: tar members are
sorted, with mtime 0, uid/gid 0, no user or group names and the modes given; layers are
uncompressed (no compressor version to pin); JSON is canonical (sorted keys, no spaces); no
timestamp appears anywhere. An archive's digests therefore depend only on its files and
settings. This module knows no image in particular and reads no file.

An archive can also carry Docker's ``manifest.json`` beside the OCI layout, for an image Docker
itself must load (``docker load`` of Debian's Docker 20.10 reads only that file); containerd
imports such an archive by its ``index.json`` as any other.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
# containerd names an imported image by this annotation (and ctr's --base-name filters on it).
ANNOTATION_IMAGE_NAME = "io.containerd.image.name"
ANNOTATION_REF_NAME = "org.opencontainers.image.ref.name"
FILE_MODE = 0o644
DIR_MODE = 0o755


@dataclass(frozen=True)
class Member:
    """One tar member: a directory (neither ``data`` nor ``link``), a file, or a symlink.

    Owners other than root only come from a distribution's files (a rootfs), never a catalog.
    """

    path: str
    mode: int
    data: bytes | None = None
    link: str | None = None
    uid: int = 0
    gid: int = 0


@dataclass(frozen=True)
class Platform:
    os: str
    architecture: str


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def descriptor(media_type: str, data: bytes, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": sha256_digest(data), "size": len(data), **extra}


def tar_bytes(members: Iterable[Member]) -> bytes:
    """A tar of ``members`` in path order, with nothing from the machine that wrote it."""
    buffer = io.BytesIO()
    # USTAR: no pax headers to vary; a path too long for it is an error, not a silent extension.
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for member in sorted(members, key=lambda m: m.path):
            info = tarfile.TarInfo(member.path)
            info.mode = member.mode
            info.mtime = 0
            info.uid, info.gid = member.uid, member.gid
            info.uname = info.gname = ""
            if member.link is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = member.link
                tar.addfile(info)
            elif member.data is not None:
                info.size = len(member.data)
                tar.addfile(info, io.BytesIO(member.data))
            else:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
    return buffer.getvalue()


def image_archive(
    layers: Sequence[bytes],
    *,
    platform: Platform,
    container_config: Mapping[str, Any],
    name: str,
    tag: str,
    docker_manifest: bool = False,
) -> tuple[bytes, str]:
    """An OCI image-layout tar holding one image; returns it and the manifest's digest.

    ``layers`` are uncompressed layer tars, bottom first, so each diff_id is its layer's digest.
    ``docker_manifest`` adds Docker's ``manifest.json`` naming the same blobs.
    """
    config = canonical_json(
        {
            "architecture": platform.architecture,
            "os": platform.os,
            "config": dict(container_config),
            "rootfs": {"type": "layers", "diff_ids": [sha256_digest(layer) for layer in layers]},
        }
    )
    manifest = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_MANIFEST,
            "config": descriptor(MEDIA_CONFIG, config),
            "layers": [descriptor(MEDIA_LAYER, layer) for layer in layers],
        }
    )
    index = canonical_json(
        {
            "schemaVersion": 2,
            "mediaType": MEDIA_INDEX,
            "manifests": [
                descriptor(
                    MEDIA_MANIFEST,
                    manifest,
                    platform={"architecture": platform.architecture, "os": platform.os},
                    annotations={ANNOTATION_IMAGE_NAME: f"{name}:{tag}", ANNOTATION_REF_NAME: tag},
                )
            ],
        }
    )
    blobs = {sha256_digest(blob): blob for blob in (*layers, config, manifest)}
    extra = []
    if docker_manifest:
        docker = [
            {
                "Config": _blob_path(sha256_digest(config)),
                "RepoTags": [f"{name}:{tag}"],
                "Layers": [_blob_path(sha256_digest(layer)) for layer in layers],
            }
        ]
        extra.append(Member("manifest.json", FILE_MODE, canonical_json(docker)))
    members = [
        Member("blobs", DIR_MODE),
        Member("blobs/sha256", DIR_MODE),
        *(Member(_blob_path(digest), FILE_MODE, blob) for digest, blob in blobs.items()),
        Member("index.json", FILE_MODE, index),
        Member("oci-layout", FILE_MODE, canonical_json({"imageLayoutVersion": "1.0.0"})),
        *extra,
    ]
    return tar_bytes(members), sha256_digest(manifest)


def _blob_path(digest: str) -> str:
    return f"blobs/sha256/{digest.removeprefix('sha256:')}"
