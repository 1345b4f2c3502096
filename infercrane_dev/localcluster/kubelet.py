"""How the real node runs the kubelet: its KubeletConfiguration and flags (pure, no I/O).

Settings that this kind of machine needs: cgroup v1 (``failCgroupV1: false``) with the
cgroupfs driver (no systemd), swap tolerated, and no kernel-default protection (the kubelet
then sets its tunables, which :mod:`.hoststate` puts back).  Settings that keep the node off
the network and inside its workdir: the API server is the only peer, the Pods get an empty
``resolv.conf`` (no DNS server to reach), the server listens on the node address only, health
on loopback, no read-only port, and logs, volume plugins and state under the workdir.  Image
garbage collection is off: imported images cannot be pulled back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .ports import LOOPBACK

KUBELET_PORT = 10250
KUBELET_HEALTHZ_PORT = 10248


@dataclass(frozen=True)
class KubeletPaths:
    base: Path

    @property
    def root_dir(self) -> Path:
        return self.base / "root"

    @property
    def config(self) -> Path:
        return self.base / "config.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.base / "kubeconfig"

    @property
    def pod_logs(self) -> Path:
        return self.base / "pod-logs"

    @property
    def volume_plugins(self) -> Path:
        return self.base / "volume-plugins"


def kubelet_config(
    paths: KubeletPaths,
    *,
    runtime_endpoint: str,
    client_ca: Path,
    node_ip: str,
    taints: Sequence[Mapping[str, str]],
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": runtime_endpoint,
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "protectKernelDefaults": False,
        "address": node_ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": LOOPBACK,
        "healthzPort": KUBELET_HEALTHZ_PORT,
        # The API server authenticates with a client cert of the cluster CA; anything else
        # is asked about through the API server (webhook), never let in anonymously.
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "Webhook"},
        "registerWithTaints": [dict(t) for t in taints],
        "clusterDomain": "cluster.local",
        # No cluster DNS, and no host resolvers either: Pods cannot reach them.
        "resolvConf": "",
        "podLogsDirectory": str(paths.pod_logs),
        "volumePluginDir": str(paths.volume_plugins),
        "hairpinMode": "none",
        # Imported images cannot be pulled again: never collect them.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # A developer machine's disk is often fuller than the defaults allow (10 %/15 %).
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        # Graceful node shutdown talks to systemd-logind over D-Bus.
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodCriticalPods": "0s",
        "serializeImagePulls": False,
    }


def kubelet_args(
    paths: KubeletPaths, *, node_ip: str, labels: Mapping[str, str], verbosity: int = 2
) -> list[str]:
    return [
        f"--config={paths.config}",
        f"--kubeconfig={paths.kubeconfig}",
        f"--root-dir={paths.root_dir}",
        f"--node-ip={node_ip}",
        "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
        f"--v={verbosity}",
    ]
