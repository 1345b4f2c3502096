"""Readiness probes for etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.

Probes use ``http.client`` directly rather than ``urllib`` so that proxy
environment variables (set for package registries) can never route a loopback
health check elsewhere.  They only read health endpoints; they must not change
cluster state.
"""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path

from .ports import LOOPBACK

_TIMEOUT = 2.0


def client_tls_context(
    ca_file: Path, cert_file: Path | None = None, key_file: Path | None = None
) -> ssl.SSLContext:
    """TLS context trusting only ``ca_file``, optionally presenting a client cert."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_file))
    if cert_file is not None:
        context.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
    return context


def http_get(
    port: int,
    path: str,
    *,
    tls: ssl.SSLContext | None = None,
    host: str = LOOPBACK,
    timeout: float = _TIMEOUT,
) -> tuple[int, bytes]:
    """GET ``path`` on ``host:port``; returns (status, body)."""
    connection: http.client.HTTPConnection
    if tls is None:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
    else:
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=tls)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def etcd_healthy(client_port: int) -> bool:
    status, body = http_get(client_port, "/health")
    if status != 200:
        return False
    return str(json.loads(body).get("health")) == "true"


def endpoint_ok(port: int, path: str, tls: ssl.SSLContext) -> bool:
    """True when an HTTPS health endpoint (``/readyz``, ``/healthz``) answers 200."""
    status, _ = http_get(port, path, tls=tls)
    return status == 200


def plain_endpoint_ok(port: int, path: str) -> bool:
    """True when a plain-HTTP health endpoint (kwok's ``/healthz``) answers 200."""
    status, _ = http_get(port, path)
    return status == 200
