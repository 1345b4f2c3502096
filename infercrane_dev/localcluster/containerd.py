"""How the real node runs containerd: its configuration (pure) and importing images into it.

containerd keeps its root, state, sockets, runc state, CNI configuration and network
namespaces in the node's workdir (``netns_mounts_under_state_dir``; runc's ``Root``).  What it
cannot move: shim sockets under ``/run/containerd/s`` (removed by :mod:`.hoststate`).  Two
settings make it work on this kind of machine: ``restrict_oom_score_adj`` (without
CAP_SYS_RESOURCE, runc cannot set the negative OOM score the kubelet asks for, and fails with
"can't get final child's PID from pipe: EOF"), and the pause image given as the sandbox image,
because nothing is ever pulled: every registry resolves to a closed loopback port, so a Pod
naming an image that was not imported fails with ErrImagePull and no packet leaves the machine.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Pods' images live in the namespace the CRI plugin serves.
K8S_NAMESPACE = "k8s.io"
# Every registry is redirected here; nothing listens on port 1 of loopback.
NO_REGISTRY = "http://127.0.0.1:1"
RUNTIME = "runc"
IMAGE_NAME_ANNOTATION = "io.containerd.image.name"


class ImageImportError(RuntimeError):
    """An image archive could not be imported (the message names it)."""


@dataclass(frozen=True)
class ContainerdPaths:
    """Where containerd keeps everything, inside the node's workdir."""

    base: Path

    @property
    def config(self) -> Path:
        return self.base / "config.toml"

    @property
    def address(self) -> Path:
        # Short on purpose: a unix socket path holds at most 107 bytes.
        return self.base / "sock"

    @property
    def root(self) -> Path:
        return self.base / "root"

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def runc_root(self) -> Path:
        return self.base / "runc"

    @property
    def registry_hosts(self) -> Path:
        return self.base / "certs.d"

    @property
    def opt(self) -> Path:
        return self.base / "opt"

    @property
    def cdi(self) -> Path:
        return self.base / "cdi"


def containerd_config(
    paths: ContainerdPaths,
    *,
    runc: Path,
    sandbox_image: str,
    cni_bin_dir: Path,
    cni_conf_dir: Path,
) -> dict[str, Any]:
    """The configuration (version 3 layout; containerd 2.4 migrates it on load)."""
    runtime = "io.containerd.cri.v1.runtime"
    return {
        "version": 3,
        "root": str(paths.root),
        "state": str(paths.state),
        "grpc": {"address": str(paths.address)},
        # No debug socket, no metrics listener.
        "debug": {"address": ""},
        "metrics": {"address": ""},
        # NRI would open /var/run/nri; nothing here uses it.
        "disabled_plugins": ["io.containerd.nri.v1.nri"],
        "plugins": {
            "io.containerd.internal.v1.opt": {"path": str(paths.opt)},
            runtime: {
                "enable_selinux": False,
                "disable_apparmor": True,
                "restrict_oom_score_adj": True,
                "netns_mounts_under_state_dir": True,
                "cdi_spec_dirs": [str(paths.cdi)],
                "containerd": {
                    "default_runtime_name": RUNTIME,
                    "runtimes": {
                        RUNTIME: {
                            "runtime_type": "io.containerd.runc.v2",
                            "options": {
                                "BinaryName": str(runc),
                                "Root": str(paths.runc_root),
                                "SystemdCgroup": False,
                            },
                        }
                    },
                },
                "cni": {
                    "bin_dirs": [str(cni_bin_dir)],
                    "conf_dir": str(cni_conf_dir),
                    "max_conf_num": 1,
                },
            },
            "io.containerd.cri.v1.images": {
                "snapshotter": "overlayfs",
                "pinned_images": {"sandbox": sandbox_image},
                "registry": {"config_path": str(paths.registry_hosts)},
            },
            # The CRI streaming server (exec, attach, port-forward) on loopback only.
            "io.containerd.grpc.v1.cri": {"stream_server_address": "127.0.0.1"},
        },
    }


def registry_hosts() -> dict[str, Any]:
    """``certs.d/_default/hosts.toml``: every registry is the closed loopback port."""
    return {"server": NO_REGISTRY, "host": {NO_REGISTRY: {"capabilities": ["pull", "resolve"]}}}


def to_toml(document: Mapping[str, Any]) -> str:
    """Render nested mappings of strings, booleans, integers and string lists as TOML."""
    lines: list[str] = []
    _table(document, [], lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # A JSON string is a valid TOML basic string.
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    raise TypeError(f"cannot render {type(value).__name__} as TOML")


def _table(table: Mapping[str, Any], path: list[str], lines: list[str]) -> None:
    scalars = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    if path and scalars:
        lines.append("")
        lines.append("[" + ".".join(_key(part) for part in path) + "]")
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars.items())
    for key, value in table.items():
        if isinstance(value, Mapping):
            _table(value, [*path, key], lines)


def containerd_args(paths: ContainerdPaths) -> list[str]:
    return ["--config", str(paths.config), "--log-level", "info"]


def ctr_argv(ctr: Path, address: Path, *args: str) -> list[str]:
    return [str(ctr), "--address", str(address), "--namespace", K8S_NAMESPACE, *args]


def archive_images(archive: Path) -> list[tuple[str, str]]:
    """(name, manifest digest) of each image an archive names (``io.containerd.image.name``)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        index = json.load(member) if member is not None else {}
    named = [
        (str((m.get("annotations") or {}).get(IMAGE_NAME_ANNOTATION, "")), str(m.get("digest", "")))
        for m in index.get("manifests", [])
    ]
    named = [(name, digest) for name, digest in named if name and digest]
    if not named:
        raise ImageImportError(
            f"image {archive}: index.json names no image ({IMAGE_NAME_ANNOTATION})"
        )
    return named


def digest_reference(name: str, digest: str) -> str:
    """``repo@sha256:…`` for image ``repo:tag`` (or ``repo@…``) with manifest ``digest``."""
    return f"{_repository(name)}@{digest}"


def import_images(ctr: Path, address: Path, archives: Iterable[Path]) -> None:
    """Import OCI archives into the k8s.io namespace, each image also as ``<repo>@<digest>``.

    The CRI resolves a digest-pinned reference only by an image of exactly that name.
    ``ctr import --digests`` names images by the digest of the archive's index, not of the
    manifest a Pod pins, so each image is tagged with its manifest digest instead.  Raises
    :class:`ImageImportError` naming the archive when one fails.
    """
    for archive in archives:
        try:
            named = archive_images(archive)
        except (OSError, tarfile.TarError, ValueError, KeyError) as error:
            raise ImageImportError(f"image {archive}: not an OCI image archive: {error}") from None
        steps = [["images", "import", "--local", str(archive)]]
        steps += [
            ["images", "tag", "--force", name, digest_reference(name, digest)]
            for name, digest in named
        ]
        for step in steps:
            done = subprocess.run(
                ctr_argv(ctr, address, *step), capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise ImageImportError(f"image {archive}: {' '.join(step[:2])} failed: {last}")


def images(ctr: Path, address: Path) -> dict[str, str]:
    """The images containerd holds in the k8s.io namespace: name -> manifest digest."""
    done = subprocess.run(
        ctr_argv(ctr, address, "images", "list"),
        capture_output=True,
        text=True,
        check=True,
    )
    # Columns: REF TYPE DIGEST SIZE PLATFORMS LABELS; the first line is the header.
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    return {row[0]: row[2] for row in rows if len(row) >= 3}


def _repository(name: str) -> str:
    """``registry/repo`` of ``registry/repo:tag`` or ``registry/repo@sha256:…``."""
    name = name.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name
