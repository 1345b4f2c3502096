"""How the local control plane runs kube-apiserver: its flags (pure, no I/O).

RBAC is the only authorizer, so every identity (the provider's included) has exactly the
rights its bindings give.  It serves on loopback with the certificates that
:mod:`.credentials` writes, and reaches a real node's kubelet with a client certificate of its
own.
"""

from __future__ import annotations

from .certs import SERVICE_CLUSTER_IP_RANGE
from .layout import ClusterLayout
from .ports import LOOPBACK

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Pods requesting an extended resource (nvidia.com/gpu) get a toleration for the taint of
# the same name, as on GKE; simulated GPU nodes carry that taint.  Harmless without nodes.
ADMISSION_PLUGINS = ("ExtendedResourceToleration",)


def apiserver_args(layout: ClusterLayout, etcd_client_port: int, secure_port: int) -> list[str]:
    return [
        f"--etcd-servers=http://{LOOPBACK}:{etcd_client_port}",
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        f"--secure-port={secure_port}",
        f"--tls-cert-file={layout.pem('apiserver.crt')}",
        f"--tls-private-key-file={layout.pem('apiserver.key')}",
        f"--client-ca-file={layout.pem('ca.crt')}",
        "--authorization-mode=RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={layout.pem('sa.pub')}",
        f"--service-account-signing-key-file={layout.pem('sa.key')}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
        # Endpoint validation rejects the loopback advertise address, so the default
        # lease reconciler would fail forever writing the kubernetes Service endpoints.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        # Only a real node runs a kubelet; it is reached at its InternalIP (an address of this
        # machine), never by a hostname that would need DNS.
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={layout.pem('apiserver-kubelet-client.crt')}",
        f"--kubelet-client-key={layout.pem('apiserver-kubelet-client.key')}",
    ]
