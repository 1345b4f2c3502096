"""How the local control plane runs kube-controller-manager: its flags (pure, no I/O).

Every controller runs (garbage collection, workloads, EndpointSlices, the CSR signer with the
cluster CA) as the controller manager's own user, without leader election, serving its health
on loopback.
"""

from __future__ import annotations

from .kubeconfig import CLUSTER_NAME
from .layout import ClusterLayout
from .ports import LOOPBACK


def controller_manager_args(layout: ClusterLayout, secure_port: int) -> list[str]:
    return [
        # No --authentication/--authorization-kubeconfig: delegated auth would look
        # for a front-proxy CA this apiserver does not have and log errors forever,
        # and only /healthz (always allowed anonymously) is ever queried here.
        f"--kubeconfig={layout.controller_manager_kubeconfig}",
        "--leader-elect=false",
        # Every controller then acts as the controller manager's own user, which
        # is why that user is in system:masters (see certs.CONTROLLER_MANAGER_GROUPS).
        "--use-service-account-credentials=false",
        "--controllers=*",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={secure_port}",
        f"--tls-cert-file={layout.pem('kube-controller-manager-serving.crt')}",
        f"--tls-private-key-file={layout.pem('kube-controller-manager-serving.key')}",
        f"--service-account-private-key-file={layout.pem('sa.key')}",
        f"--root-ca-file={layout.pem('ca.crt')}",
        f"--cluster-signing-cert-file={layout.pem('ca.crt')}",
        f"--cluster-signing-key-file={layout.pem('ca.key')}",
        f"--cluster-name={CLUSTER_NAME}",
    ]
