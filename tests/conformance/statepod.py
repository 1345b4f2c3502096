"""PostgreSQL as a Pod in a test's namespace: the runners' shared state and leases, inside the
cluster (the image: ``infercrane_dev/images/postgres.py``).

An init container runs ``initdb`` into an empty volume (the superuser's password from a Secret,
SCRAM for every connection), then ``postgres`` listens on every address with one ``pg_hba``
line: password authentication over TLS, from anywhere in the cluster. Its certificate, for the
Service's name and address, is signed by a CA made for it, which the runners verify
(``sslmode=verify-full``, the CA in their state Secret). The data lives as long as the Pod: a
test's state, not a database to keep.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from infercrane_dev.images.postgres import BIN, DATA
from infercrane_dev.localcluster import certs
from tests.conformance.harness import wait_for
from tests.conformance.runnerpod import GPU_TOLERATION, shipped

NAME = "infercrane-state"
USER = "infercrane"
DATABASE = "postgres"
PORT = 5432
_PGDATA = f"{DATA}/data/pgdata"
_SECRET_DIR = "/etc/infercrane-state-db"
# Where the shipped runner reads its state's CA (the optional ``ca.crt`` of its state Secret).
[_CA_MOUNT] = [
    mount["mountPath"]
    for mount in shipped("Deployment")["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    if mount["name"] == "state-ca"
]
RUNNER_CA = f"{_CA_MOUNT}/ca.crt"
_HARDENED = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def _deployment(namespace: str, image: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": NAME}
    mounts = [
        {"name": "data", "mountPath": f"{DATA}/data"},
        {"name": "secret", "mountPath": _SECRET_DIR, "readOnly": True},
        {"name": "hba", "mountPath": "/etc/infercrane-state-hba", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    initdb = [
        f"{BIN}/initdb",
        *("-D", _PGDATA, "-U", USER, f"--pwfile={_SECRET_DIR}/password"),
        *("--auth=scram-sha-256", "--encoding=UTF8", "--locale=C"),
    ]
    server = [
        f"{BIN}/postgres",
        *("-D", _PGDATA, "-c", "listen_addresses=*", "-c", "unix_socket_directories=/tmp"),
        *("-c", "hba_file=/etc/infercrane-state-hba/pg_hba.conf", "-c", "jit=off"),
        *("-c", "ssl=on", "-c", f"ssl_cert_file={_SECRET_DIR}/tls.crt"),
        *("-c", f"ssl_key_file={_SECRET_DIR}/tls.key"),
    ]
    resources = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "automountServiceAccountToken": False,
                    "tolerations": [GPU_TOLERATION],
                    "securityContext": {"runAsNonRoot": True, "fsGroup": 65532},
                    "initContainers": [
                        {
                            "name": "initdb",
                            "image": image,
                            "command": initdb,
                            "securityContext": _HARDENED,
                            "resources": resources,
                            "volumeMounts": mounts,
                        }
                    ],
                    "containers": [
                        {
                            "name": "postgres",
                            "image": image,
                            "command": server,
                            "ports": [{"name": "postgres", "containerPort": PORT}],
                            "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 1},
                            "securityContext": _HARDENED,
                            "resources": resources,
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": [
                        {"name": "data", "emptyDir": {}},
                        {"name": "tmp", "emptyDir": {}},
                        # Owned by root, readable by the fsGroup: the key's mode PostgreSQL
                        # accepts from a file it does not own.
                        {"name": "secret", "secret": {"secretName": NAME, "defaultMode": 0o640}},
                        {"name": "hba", "configMap": {"name": NAME}},
                    ],
                },
            },
        },
    }


@dataclass
class StatePod:
    api: client.ApiClient
    namespace: str
    password: str = ""
    ca: bytes = b""  # the CA that signed the server's certificate
    # The Service's ClusterIP in the URL rather than its name: no cluster DNS on the way (its
    # Pods run on the node whose kubelet a test stops).
    by_address: bool = False

    @property
    def url(self) -> str:
        """The backend URL a runner in the namespace uses (the password in it: the runner's
        Secret holds it)."""
        host = f"{NAME}.{self.namespace}.svc"
        if self.by_address:
            found = client.CoreV1Api(self.api).read_namespaced_service(NAME, self.namespace)
            host = str(found.spec.cluster_ip) if found.spec else host
        tls = f"sslmode=verify-full&sslrootcert={RUNNER_CA}"
        return f"postgres://{USER}:{self.password}@{host}:{PORT}/{DATABASE}?{tls}"

    def start(self, image: str, labels: Mapping[str, str]) -> None:
        self.password = secrets.token_hex(16)
        core = client.CoreV1Api(self.api)
        meta = client.V1ObjectMeta(name=NAME, namespace=self.namespace, labels=dict(labels))
        service = client.V1Service(
            metadata=meta,
            spec=client.V1ServiceSpec(
                selector={"app.kubernetes.io/name": NAME},
                ports=[client.V1ServicePort(name="postgres", port=PORT, target_port=PORT)],
            ),
        )
        made_service: Any = core.create_namespaced_service(self.namespace, service)
        ca = certs.generate_ca("infercrane-state-ca")
        host = f"{NAME}.{self.namespace}.svc"
        address = str(made_service.spec.cluster_ip)
        served = certs.issue_serving_cert(ca, NAME, [host, f"{host}.cluster.local"], [address])
        self.ca = ca.cert_pem
        tls = {"tls.crt": served.cert_pem.decode(), "tls.key": served.key_pem.decode()}
        core.create_namespaced_secret(
            self.namespace,
            client.V1Secret(metadata=meta, string_data={"password": self.password} | tls),
        )
        hba = "hostssl all all all scram-sha-256\n"  # TLS only
        core.create_namespaced_config_map(
            self.namespace, client.V1ConfigMap(metadata=meta, data={"pg_hba.conf": hba})
        )
        made: Any = _deployment(self.namespace, image)
        made["metadata"]["labels"] = dict(labels)
        apps = client.AppsV1Api(self.api)
        apps.create_namespaced_deployment(self.namespace, made)

        def available() -> bool | None:
            status = apps.read_namespaced_deployment_status(NAME, self.namespace).status
            return bool(status and status.available_replicas) or None

        wait_for(available, timeout=180, what="PostgreSQL's Pod ready")
