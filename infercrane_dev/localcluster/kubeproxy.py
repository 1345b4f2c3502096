"""How the real node runs kube-proxy: its KubeProxyConfiguration and flags (pure, no I/O).

iptables mode, so a ClusterIP answers from the host and from Pods.  Health and metrics listen
on loopback.  Connection-tracking limits are left as the host has them (zeros), and localhost
NodePorts are off, which spares ``net.ipv4.conf.all.route_localnet``: kube-proxy then changes
no tunable.  NodePorts are served on the node address (the bridge) only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .ports import LOOPBACK

HEALTHZ_PORT = 10256
METRICS_PORT = 10249


def kube_proxy_config(
    *, kubeconfig: Path, node_name: str, cluster_cidr: str, node_ip: str
) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "hostnameOverride": node_name,
        "bindAddress": node_ip,
        "healthzBindAddress": f"{LOOPBACK}:{HEALTHZ_PORT}",
        "metricsBindAddress": f"{LOOPBACK}:{METRICS_PORT}",
        "clusterCIDR": cluster_cidr,
        "detectLocalMode": "ClusterCIDR",
        "nodePortAddresses": [f"{node_ip}/32"],
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def kube_proxy_args(config: Path, verbosity: int = 2) -> list[str]:
    return [f"--config={config}", f"--v={verbosity}"]
