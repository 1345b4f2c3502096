"""Puts one cluster's credentials into its workdir: the PEM files the daemons read and a
kubeconfig per identity.

:mod:`.certs` generates them in memory and :mod:`.kubeconfig` renders the documents; this
module decides which file each one goes to (:class:`.layout.ClusterLayout`).  Private keys,
and the pki directory, are readable by the owner only.
"""

from __future__ import annotations

import os
from pathlib import Path

from .certs import CONTROLLER_MANAGER_USER, KWOK_USER, SCHEDULER_USER, ClusterPki, KeyPair
from .kubeconfig import (
    ADMIN_CONTEXT,
    PROVIDER_CONTEXT,
    build_kubeconfig,
    write_daemon_kubeconfig,
    write_kubeconfig,
)
from .layout import ClusterLayout


def write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _write_pair(layout: ClusterLayout, stem: str, pair: KeyPair) -> None:
    layout.pem(f"{stem}.crt").write_bytes(pair.cert_pem)
    write_private(layout.pem(f"{stem}.key"), pair.key_pem)


def write_pki(layout: ClusterLayout, pki: ClusterPki) -> None:
    """Every PEM file a daemon or a client of ``layout``'s cluster reads, into its pki dir."""
    layout.pki.mkdir(mode=0o700)
    layout.pem("ca.crt").write_bytes(pki.ca.cert_pem)
    # The CA key lets the controller manager's CSR signer issue certificates.
    write_private(layout.pem("ca.key"), pki.ca.key_pem)
    for stem, pair in (
        ("apiserver", pki.apiserver_serving),
        ("kube-controller-manager-serving", pki.controller_manager_serving),
        ("kube-scheduler-serving", pki.scheduler_serving),
        ("admin", pki.admin),
        ("provider", pki.provider),
        ("kube-controller-manager", pki.controller_manager),
        ("apiserver-kubelet-client", pki.apiserver_kubelet_client),
    ):
        _write_pair(layout, stem, pair)
    write_private(layout.pem("sa.key"), pki.service_account.private_pem)
    layout.pem("sa.pub").write_bytes(pki.service_account.public_pem)


def write_kubeconfigs(
    layout: ClusterLayout, pki: ClusterPki, server: str, *, scheduling: bool
) -> None:
    """The user-facing kubeconfig (admin and provider contexts) and one per daemon that talks
    to ``server``: the controller manager, and with ``scheduling`` the scheduler and kwok."""
    write_kubeconfig(
        layout.kubeconfig,
        build_kubeconfig(
            server, pki.ca.cert_pem, {ADMIN_CONTEXT: pki.admin, PROVIDER_CONTEXT: pki.provider}
        ),
    )
    daemon_users = [
        (layout.controller_manager_kubeconfig, CONTROLLER_MANAGER_USER, pki.controller_manager)
    ]
    if scheduling:
        daemon_users += [
            (layout.scheduler_kubeconfig, SCHEDULER_USER, pki.scheduler),
            (layout.kwok_kubeconfig, KWOK_USER, pki.kwok),
        ]
    for path, user, pair in daemon_users:
        write_daemon_kubeconfig(path, server, pki.ca.cert_pem, user, pair)
