"""The provider identity the suite acts as, the same on every cluster.

It is the test namespace's ``infercrane-control-plane`` ServiceAccount, which the shipped
RoleBindings already bind to the shipped Roles: exactly the identity an in-cluster control
plane has, so nothing but ``deploy/kubernetes`` grants it anything. Its short-lived token
comes from the TokenRequest API and is written to a kubeconfig (0600) that holds only this
identity, so no test can reach the admin's credentials through it.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from infercrane_dev.localcluster import new_api_client
from infercrane_dev.localcluster.bootstrap import CONTROL_PLANE_ACCOUNT, service_account_subject
from infercrane_dev.localcluster.kubeconfig import write_kubeconfig

PROVIDER_CONTEXT = "infercrane-conformance-provider"
# Twice a conformance test's timeout (tests/conftest.py); the API server's minimum is 600 s.
TOKEN_SECONDS = 1200
# The parts of a cluster entry a client needs to reach and trust the API server.
CLUSTER_KEYS = (
    "server",
    "certificate-authority-data",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "proxy-url",
)


class KubeconfigError(ValueError):
    """The admin kubeconfig does not name the context or its cluster; one line."""


def _documents(kubeconfig: str) -> list[tuple[Path, dict[str, Any]]]:
    paths = [Path(p).expanduser() for p in kubeconfig.split(os.pathsep) if p]
    return [(path, yaml.safe_load(path.read_text()) or {}) for path in paths if path.is_file()]


def _first(
    documents: list[tuple[Path, dict[str, Any]]], section: str, name: str
) -> tuple[Path, dict[str, Any]]:
    """The first entry named ``name``, as kubectl merges several files (first one wins)."""
    for path, document in documents:
        for entry in document.get(section) or []:
            if entry.get("name") == name:
                return path, entry
    files = os.pathsep.join(str(path) for path, _ in documents)
    raise KubeconfigError(f"no {section[:-1]} {name!r} in kubeconfig {files}")


def cluster_entry(kubeconfig: str, context: str) -> dict[str, Any]:
    """How ``context`` reaches its API server, self-contained (a CA file is inlined)."""
    documents = _documents(kubeconfig)
    if not documents:
        raise KubeconfigError(f"kubeconfig {kubeconfig} not found")
    _, named = _first(documents, "contexts", context)
    path, cluster = _first(documents, "clusters", named["context"]["cluster"])
    entry = {k: v for k, v in cluster["cluster"].items() if k in CLUSTER_KEYS}
    if "certificate-authority" in cluster["cluster"]:
        # Relative paths in a kubeconfig are relative to the file that names them.
        ca = path.parent / Path(cluster["cluster"]["certificate-authority"]).expanduser()
        entry["certificate-authority-data"] = base64.b64encode(ca.read_bytes()).decode()
    return entry


@dataclass(frozen=True)
class ProviderIdentity:
    namespace: str
    kubeconfig: Path
    context: str = PROVIDER_CONTEXT

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{CONTROL_PLANE_ACCOUNT}"

    @property
    def subject(self) -> dict[str, str]:
        """This identity as a RoleBinding subject (to bind it in another namespace)."""
        return service_account_subject(self.namespace)

    def document(self) -> dict[str, Any]:
        loaded: dict[str, Any] = yaml.safe_load(self.kubeconfig.read_text())
        return loaded

    def api_client(self) -> client.ApiClient:
        return new_api_client(self.kubeconfig, self.context)


def issue(
    admin: client.ApiClient, cluster: Mapping[str, Any], namespace: str, path: Path
) -> ProviderIdentity:
    """A fresh token for ``namespace``'s control-plane account, in a kubeconfig at ``path``."""
    request = client.AuthenticationV1TokenRequest(
        # No audience: the API server's own, which is what a client of it presents.
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=TOKEN_SECONDS)
    )
    answer = client.CoreV1Api(admin).create_namespaced_service_account_token(
        CONTROL_PLANE_ACCOUNT, namespace, request
    )
    assert answer.status is not None
    token = str(answer.status.token)
    write_kubeconfig(
        path,
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "cluster", "cluster": dict(cluster)}],
            "users": [{"name": PROVIDER_CONTEXT, "user": {"token": token}}],
            "contexts": [
                {
                    "name": PROVIDER_CONTEXT,
                    "context": {"cluster": "cluster", "user": PROVIDER_CONTEXT},
                }
            ],
        },
    )
    return ProviderIdentity(namespace=namespace, kubeconfig=path)
