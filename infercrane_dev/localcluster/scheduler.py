"""How the local control plane runs kube-scheduler (with scheduling on): its flags (pure, no I/O).

One scheduler, no leader election, health on loopback; it binds Pods to the simulated nodes
and to the real node alike.
"""

from __future__ import annotations

from .layout import ClusterLayout
from .ports import LOOPBACK


def scheduler_args(layout: ClusterLayout, secure_port: int) -> list[str]:
    return [
        # As for the controller manager: no delegated-auth kubeconfigs, only /readyz is
        # queried and it is always allowed anonymously.
        f"--kubeconfig={layout.scheduler_kubeconfig}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={secure_port}",
        f"--tls-cert-file={layout.pem('kube-scheduler-serving.crt')}",
        f"--tls-private-key-file={layout.pem('kube-scheduler-serving.key')}",
    ]
