"""The Kind node image ``infercrane.local/kind-node:<Kubernetes version>``, assembled as kind's
own node-image builder does, minus every pull.

kind's ``build node-image`` always pulls (etcd, pause, CoreDNS, kindnetd, local-path), so this
module does its steps itself: a container from the Debian base (:mod:`.baseimage`), kind's node
files (``hack/tools``, family ``kind``, with the modes kind's base Dockerfile gives them), the
node's binaries from the tools bin dir (containerd, the CNI plugins, kubelet, kubeadm, kubectl)
copied in as one reproducible layer, then containerd started inside to import the images
kubeadm runs (:mod:`.kubeimages`) with ``ctr images import --no-unpack``, and ``docker commit``.

Two settings of kind's containerd configuration change: ``restrict_oom_score_adj`` (without
CAP_SYS_RESOURCE, runc cannot set the negative OOM score the kubelet asks for, and every Pod
sandbox fails with "can't get final child's PID from pipe: EOF"), and the sandbox image, set to
the pause kubeadm names (kind's file names an older one). kindnetd, kind's CNI, is not served by
the Go module proxy: the node carries the bridge and host-local plugins, and :mod:`.network`
writes their configuration and the routes between nodes once the cluster exists.

The image is labelled with its key (the base's image id, the node layer's digest, the digests
of the Kubernetes images, the Kubernetes version and this module's source), and rebuilt only
when the key changes; Docker's data root keeps it between clusters. The commit itself is not
byte-reproducible (containerd's metadata records import times); what goes into it is.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercrane_dev.images import BuiltImage, Sources
from infercrane_dev.images.build import layer_tar
from infercrane_dev.images.catalog import Directory, Entry, Executable, Symlink, Text

from .baseimage import BaseImage
from .docker import Docker

REPOSITORY = "infercrane.local/kind-node"
KEY_LABEL = "dev.infercrane.kind-node.key"
KIND_FILES = "kind-node"  # the kind family's files in the tools bin dir
CONTAINERD_CONFIG = "etc/containerd/config.toml"
# kind's enabled units (its Dockerfile's `systemctl enable`), all WantedBy=multi-user.target.
ENABLED_UNITS = ("kubelet.service", "containerd.service", "undo-mount-hacks.service")
# Node binaries from the tools bin dir, and where kind's node expects them.
BINARIES = {
    "usr/local/bin": ("containerd", "containerd-shim-runc-v2", "ctr"),
    "opt/cni/bin": ("bridge", "host-local", "loopback"),
    "usr/bin": ("kubelet", "kubeadm", "kubectl"),
}
_DIRECTORIES = (
    "LICENSES",
    "kind",
    "kind/bin",
    "opt",
    "opt/cni",
    "opt/cni/bin",
    "etc/cni",
    "etc/cni/net.d",
    "etc/containerd",
    "etc/kubernetes",
    "etc/kubernetes/manifests",
    "etc/systemd/system/kubelet.service.d",
    "etc/systemd/system/multi-user.target.wants",
)
_OOM = "restrict_oom_score_adj = false"
_SANDBOX = 'sandbox_image = "registry.k8s.io/pause:3.10"'
_IMPORT = (
    "ctr",
    "--namespace=k8s.io",
    "images",
    "import",
    "--label=io.cri-containerd.pinned=pinned",
    "--all-platforms",
    "--no-unpack",
    "--digests",
    "-",
)
_CONTAINERD_SECONDS = 30.0


class NodeImageError(RuntimeError):
    """The node image could not be built (one line)."""


def containerd_config(kind_config: str, sandbox_image: str) -> str:
    """kind's containerd configuration with the two changes this machine needs."""
    for setting in (_OOM, _SANDBOX):
        if kind_config.count(setting) != 1:
            raise NodeImageError(f"kind's {CONTAINERD_CONFIG} no longer holds {setting!r} once")
    return kind_config.replace(_OOM, "restrict_oom_score_adj = true").replace(
        _SANDBOX, f'sandbox_image = "{sandbox_image}"'
    )


def cri_base_spec(default_spec: dict[str, Any]) -> dict[str, Any]:
    """kind's ``cri-base.json``: ``ctr oci spec`` plus its product-files hook, no rlimits."""
    spec: dict[str, Any] = json.loads(json.dumps(default_spec))
    hooks = spec.setdefault("hooks", {}).setdefault("createContainer", [])
    hooks.append({"path": "/kind/bin/mount-product-files.sh"})
    spec.get("process", {}).pop("rlimits", None)
    return spec


def _kind_file(relative: str, bin_dir: Path) -> Entry:
    """A kind node file with the mode kind's Dockerfile gives it: scripts 0755, others 0644."""
    source = f"{KIND_FILES}/{relative}"
    if relative.startswith(("usr/local/bin/", "kind/bin/")):
        return Executable(relative, source)
    return Text(relative, (bin_dir / source).read_text(encoding="utf-8"))


def node_entries(
    bin_dir: Path, *, kubernetes_version: str, sandbox_image: str, cri_base: dict[str, Any]
) -> list[Entry]:
    """Everything the node layer holds, over the base."""
    kind_dir = bin_dir / KIND_FILES
    files = sorted(str(p.relative_to(kind_dir)) for p in kind_dir.rglob("*") if p.is_file())
    entries: list[Entry] = [Directory(d) for d in _DIRECTORIES]
    entries += [_kind_file(f, bin_dir) for f in files if f != CONTAINERD_CONFIG]
    kind_config = (kind_dir / CONTAINERD_CONFIG).read_text(encoding="utf-8")
    entries += [
        Text(CONTAINERD_CONFIG, containerd_config(kind_config, sandbox_image)),
        Text("etc/containerd/cri-base.json", json.dumps(cri_base, indent=2, sort_keys=True)),
        Text("kind/version", kubernetes_version),
        *(
            Symlink(
                f"etc/systemd/system/multi-user.target.wants/{unit}", f"/etc/systemd/system/{unit}"
            )
            for unit in ENABLED_UNITS
        ),
        *(
            Executable(f"{directory}/{binary}", binary)
            for directory, binaries in BINARIES.items()
            for binary in binaries
        ),
    ]
    return entries


def default_oci_spec(ctr: Path) -> dict[str, Any]:
    done = subprocess.run([str(ctr), "oci", "spec"], capture_output=True, text=True, check=True)
    spec: dict[str, Any] = json.loads(done.stdout)
    return spec


@dataclass(frozen=True)
class NodeImagePlan:
    """What a node image is made of, and the key that names it."""

    reference: str
    layer: bytes
    images: Sequence[BuiltImage]
    base: BaseImage
    key: str


def plan(
    bin_dir: Path, base: BaseImage, *, images: Sequence[BuiltImage], kubernetes_version: str
) -> NodeImagePlan:
    [pause] = [i for i in images if i.name.endswith("/pause")]
    layer = layer_tar(
        node_entries(
            bin_dir,
            kubernetes_version=kubernetes_version,
            sandbox_image=f"{pause.name}:{pause.tag}",
            cri_base=cri_base_spec(default_oci_spec(bin_dir / "ctr")),
        ),
        Sources(bin_dir),
    )
    recipe = [
        kubernetes_version,
        base.image_id,
        hashlib.sha256(layer).hexdigest(),
        *sorted(f"{i.name}:{i.tag}@{i.digest}" for i in images),
        Path(__file__).read_text(encoding="utf-8"),
    ]
    key = hashlib.sha256("\n".join(recipe).encode()).hexdigest()[:12]
    return NodeImagePlan(f"{REPOSITORY}:{kubernetes_version}", layer, images, base, key)


def current(docker: Docker, wanted: NodeImagePlan) -> bool:
    """Whether Docker holds the node image under its reference with the wanted key."""
    found = docker.inspect("image", wanted.reference)
    labels = ((found or {}).get("Config") or {}).get("Labels") or {}
    return bool(labels.get(KEY_LABEL) == wanted.key)


def ensure_base_loaded(docker: Docker, base: BaseImage) -> None:
    if docker.inspect("image", base.image_id) is None:
        docker.run("load", "--input", str(base.archive))


def build(docker: Docker, wanted: NodeImagePlan) -> None:
    """Build the node image in Docker (about a minute); the build container is always removed."""
    ensure_base_loaded(docker, wanted.base)
    name = f"infercrane-kind-build-{wanted.key}"
    docker.run("rm", "--force", "--volumes", name)
    docker.run(
        "run",
        "--detach",
        f"--name={name}",
        "--entrypoint=sleep",
        "--security-opt",
        "seccomp=unconfined",
        wanted.base.image_id,
        "infinity",
    )
    try:
        docker.run("cp", "-", f"{name}:/", stdin=wanted.layer)
        docker.exec(name, ["bash", "-c", "nohup containerd >/dev/null 2>&1 &"])
        _wait_for_containerd(docker, name)
        for image in wanted.images:
            docker.exec(name, _IMPORT, stdin=image.archive.read_bytes())
        docker.exec(name, ["pkill", "-x", "containerd"])
        _wait_for_containerd(docker, name, gone=True)
        docker.run(
            "commit",
            "--change",
            'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]',
            "--change",
            'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""',
            "--change",
            f"LABEL {KEY_LABEL}={wanted.key}",
            name,
            wanted.reference,
        )
    finally:
        docker.run("rm", "--force", "--volumes", name)
    # The node image this one replaced, now untagged: the data root keeps one per version.
    docker.run("image", "prune", "--force", "--filter", f"label={KEY_LABEL}")


def _wait_for_containerd(docker: Docker, container: str, *, gone: bool = False) -> None:
    # Gone: its socket removed (PID 1 here is sleep, which reaps no one: a zombie stays listed).
    probe = "! test -S /run/containerd/containerd.sock" if gone else "ctr version"
    deadline = time.monotonic() + _CONTAINERD_SECONDS
    while not docker.succeeds("exec", container, "sh", "-c", probe):
        if time.monotonic() > deadline:
            state = "stop" if gone else "answer"
            raise NodeImageError(f"containerd in the build container did not {state} in time")
        time.sleep(0.5)
