"""Build kubeconfig documents for the local control plane.

The user-facing kubeconfig deliberately has *no* current-context: the project
always names a context (``infercrane-admin`` or ``infercrane-provider``), and a
default would let code silently act as admin when it meant to act as the
provider.  A daemon's kubeconfig is the opposite: daemons get no ``--context``
flag, so its one user is the current context.  Credentials are embedded
(``*-data``) so the file stays valid on its own.  This module only renders and
writes YAML; it does not talk to a cluster.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from .certs import KeyPair

CLUSTER_NAME = "infercrane-local"
ADMIN_CONTEXT = "infercrane-admin"
PROVIDER_CONTEXT = "infercrane-provider"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def build_kubeconfig(
    server: str,
    ca_pem: bytes,
    users: Mapping[str, KeyPair],
    *,
    cluster_name: str = CLUSTER_NAME,
    current_context: str | None = None,
) -> dict[str, Any]:
    """One cluster, and one context per user, each named after its user."""
    if current_context is not None and current_context not in users:
        raise ValueError(f"current_context {current_context!r} is not one of {sorted(users)}")
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [
            {
                "name": cluster_name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": _b64(ca_pem),
                },
            }
        ],
        "users": [
            {
                "name": name,
                "user": {
                    "client-certificate-data": _b64(pair.cert_pem),
                    "client-key-data": _b64(pair.key_pem),
                },
            }
            for name, pair in users.items()
        ],
        "contexts": [
            {"name": name, "context": {"cluster": cluster_name, "user": name}} for name in users
        ],
    }
    if current_context is not None:
        config["current-context"] = current_context
    return config


def write_kubeconfig(path: Path, config: Mapping[str, Any]) -> Path:
    """Write ``config`` readable only by the owner: it embeds private keys."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(dict(config), handle, sort_keys=False)
    return path


def write_daemon_kubeconfig(
    path: Path, server: str, ca_pem: bytes, user: str, pair: KeyPair
) -> Path:
    """Write a daemon's kubeconfig: its one ``user``, which is also the current context."""
    return write_kubeconfig(
        path, build_kubeconfig(server, ca_pem, {user: pair}, current_context=user)
    )
