"""Where every file of one local cluster lives: its workdir, and the real node's inside it.

Pure paths, no I/O.  The writers (:mod:`.credentials`, :mod:`.nodefiles`), the daemons'
command lines and the teardown all name a file through these, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .containerd import ContainerdPaths
from .kubelet import KubeletPaths


@dataclass(frozen=True)
class NodeLayout:
    """Where every file of the real node lives, inside ``<cluster workdir>/node``."""

    root: Path

    @property
    def containerd(self) -> ContainerdPaths:
        return ContainerdPaths(self.root / "containerd")

    @property
    def kubelet(self) -> KubeletPaths:
        return KubeletPaths(self.root / "kubelet")

    @property
    def cni_bin(self) -> Path:
        return self.root / "cni" / "bin"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kube_proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    @property
    def kube_proxy_kubeconfig(self) -> Path:
        return self.root / "kube-proxy.kubeconfig"


@dataclass(frozen=True)
class ClusterLayout:
    """Where each file of one cluster lives inside its workdir."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def controller_manager_kubeconfig(self) -> Path:
        return self.root / "kube-controller-manager.kubeconfig"

    @property
    def scheduler_kubeconfig(self) -> Path:
        return self.root / "kube-scheduler.kubeconfig"

    @property
    def kwok_kubeconfig(self) -> Path:
        return self.root / "kwok.kubeconfig"

    @property
    def kwok_home(self) -> Path:
        return self.root / "kwok-home"

    @property
    def kserve_kubeconfig(self) -> Path:
        return self.root / "kserve-manager.kubeconfig"

    @property
    def kserve_tmp(self) -> Path:
        """The KServe manager's TMPDIR (its webhook serving certificate is read from there)."""
        return self.root / "kserve-tmp"

    @property
    def node(self) -> NodeLayout:
        return NodeLayout(self.root / "node")

    def pem(self, name: str) -> Path:
        return self.pki / name
