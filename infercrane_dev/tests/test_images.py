"""The node's images: reproducible (a second build gives the same bytes, and the digests are the
committed ones), valid OCI image layouts (index.json -> manifest -> config and layers, every
digest and size verified, nothing else in the archive), and each image's files, links,
entrypoint and environment exactly as written here, independently of the catalog.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from infercrane_dev.images import BuiltImage, build_images, digests, host_platform

PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DIR, FILE, LINK = tarfile.DIRTYPE, tarfile.REGTYPE, tarfile.SYMTYPE
ROOTFS = [
    ("dev", DIR, 0o755, ""),
    ("etc", DIR, 0o755, ""),
    ("proc", DIR, 0o755, ""),
    ("sys", DIR, 0o755, ""),
    ("tmp", DIR, 0o1777, ""),
    ("usr", DIR, 0o755, ""),
    ("usr/bin", DIR, 0o755, ""),
    ("usr/local", DIR, 0o755, ""),
    ("usr/local/bin", DIR, 0o755, ""),
]
STANDIN = [("usr/local/bin/infercrane-standin", FILE, 0o755, "")]
VLLM_LINKS = [
    ("usr/bin/python3", LINK, 0o777, "/usr/local/bin/infercrane-standin"),
    ("usr/local/bin/vllm", LINK, 0o777, "infercrane-standin"),
]
# image -> (its layers' members, bottom first; the config's "config"); a file's bytes are the
# bin dir's binary of the same base name.
EXPECTED: dict[str, tuple[list[list[tuple[str, bytes, int, str]]], dict[str, Any]]] = {
    "pause": (
        [ROOTFS, [("pause", FILE, 0o755, "")]],
        {"Env": [PATH_ENV], "Entrypoint": ["/pause"]},
    ),
    "vllm-openai-standin": (
        [ROOTFS, STANDIN, VLLM_LINKS],
        {"Env": [PATH_ENV], "Entrypoint": ["vllm", "serve"]},
    ),
    "vllm-openai-legacy-standin": (
        [ROOTFS, STANDIN, VLLM_LINKS],
        {"Env": [PATH_ENV], "Entrypoint": ["python3", "-m", "vllm.entrypoints.openai.api_server"]},
    ),
    "runtime-standin": (
        [ROOTFS, STANDIN, [("usr/bin/python3", LINK, 0o777, "/usr/local/bin/infercrane-standin")]],
        {"Env": [PATH_ENV]},
    ),
    "gpu-device-plugin": (
        [ROOTFS, [("usr/local/bin/infercrane-gpu-device-plugin", FILE, 0o755, "")]],
        {"Env": [PATH_ENV], "Entrypoint": ["/usr/local/bin/infercrane-gpu-device-plugin"]},
    ),
}
BINARY_OF = {
    "pause": "infercrane-pause",
    "usr/local/bin/infercrane-standin": "infercrane-standin",
    "usr/local/bin/infercrane-gpu-device-plugin": "infercrane-gpu-device-plugin",
}


@pytest.fixture(scope="module")
def built(node_bin_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[BuiltImage]:
    return build_images(node_bin_dir, tmp_path_factory.mktemp("images"))


def by_name(images: list[BuiltImage], name: str) -> BuiltImage:
    [image] = [i for i in images if i.name == f"infercrane.local/standins/{name}"]
    return image


def members(tar_bytes: bytes) -> tuple[list[tarfile.TarInfo], dict[str, bytes]]:
    """Every member, and the contents of the regular files; asserts the fixed metadata."""
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        infos = tar.getmembers()
        contents = {i.name: tar.extractfile(i).read() for i in infos if i.isfile()}  # type: ignore[union-attr]
    assert [i.name for i in infos] == sorted(i.name for i in infos)
    assert {(i.mtime, i.uid, i.gid, i.uname, i.gname) for i in infos} == {(0, 0, 0, "", "")}
    return infos, contents


def test_a_second_build_gives_the_same_bytes(
    built: list[BuiltImage], node_bin_dir: Path, tmp_path: Path
) -> None:
    again = build_images(node_bin_dir, tmp_path)
    assert [(i.name, i.tag, i.digest) for i in again] == [(i.name, i.tag, i.digest) for i in built]
    assert [i.archive.read_bytes() for i in again] == [i.archive.read_bytes() for i in built]


def test_the_digests_are_the_committed_ones(built: list[BuiltImage]) -> None:
    committed = digests.committed()
    fresh = digests.record(built, host_platform())
    if fresh["platform"] != committed["platform"]:
        pytest.skip(f"digests are committed for {committed['platform']}, not {fresh['platform']}")
    assert fresh == committed


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_archive_is_a_valid_layout_of_exactly_its_image(
    built: list[BuiltImage], node_bin_dir: Path, name: str
) -> None:
    image = by_name(built, name)
    expected_layers, expected_config = EXPECTED[name]
    _, files = members(image.archive.read_bytes())
    blobs = {
        f"sha256:{path.rsplit('/', 1)[1]}": data for path, data in files.items() if "/" in path
    }
    assert {
        digest: "sha256:" + hashlib.sha256(data).hexdigest() for digest, data in blobs.items()
    } == {digest: digest for digest in blobs}
    assert files["oci-layout"] == b'{"imageLayoutVersion":"1.0.0"}'
    manifest_bytes = blobs[image.digest]
    assert json.loads(files["index.json"]) == {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": image.digest,
                "size": len(manifest_bytes),
                "platform": {"architecture": host_platform().architecture, "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": f"{image.name}:{image.tag}",
                    "org.opencontainers.image.ref.name": image.tag,
                },
            }
        ],
    }
    manifest = json.loads(manifest_bytes)
    layer_digests = [layer["digest"] for layer in manifest["layers"]]
    assert manifest == {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": manifest["config"]["digest"],
            "size": len(blobs[manifest["config"]["digest"]]),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": digest,
                "size": len(blobs[digest]),
            }
            for digest in layer_digests
        ],
    }
    assert set(blobs) == {image.digest, manifest["config"]["digest"], *layer_digests}
    assert json.loads(blobs[manifest["config"]["digest"]]) == {
        "architecture": host_platform().architecture,
        "os": "linux",
        "config": expected_config,
        "rootfs": {"type": "layers", "diff_ids": layer_digests},
    }
    layers = [members(blobs[digest]) for digest in layer_digests]
    assert [[(i.name, i.type, i.mode, i.linkname) for i in infos] for infos, _ in layers] == (
        expected_layers
    )
    assert {path: data for _, contents in layers for path, data in contents.items()} == {
        path: (node_bin_dir / BINARY_OF[path]).read_bytes()
        for layer in expected_layers
        for path, kind, _, _ in layer
        if kind == FILE
    }
