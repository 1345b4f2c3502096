"""Certificates, kubeconfig and port helpers of the local control plane."""

from __future__ import annotations

import base64
import ipaddress
import socket
import stat
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from infercrane_dev.localcluster import certs
from infercrane_dev.localcluster.kubeconfig import (
    ADMIN_CONTEXT,
    CLUSTER_NAME,
    PROVIDER_CONTEXT,
    build_kubeconfig,
    write_kubeconfig,
)
from infercrane_dev.localcluster.ports import free_port, free_ports


@pytest.fixture(scope="module")
def pki() -> certs.ClusterPki:
    return certs.generate_cluster_pki()


def _cn(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


def _orgs(cert: x509.Certificate) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]


def _eku(cert: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_ca_is_a_ca(pki: certs.ClusterPki) -> None:
    constraints = pki.ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.value.ca is True
    assert constraints.critical


def test_apiserver_serving_cert_sans(pki: certs.ClusterPki) -> None:
    cert = pki.apiserver_serving.certificate
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = set(san.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    assert {
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    } <= dns
    assert {"127.0.0.1", "::1", certs.KUBERNETES_SERVICE_IP} <= ips
    assert ipaddress.ip_address(certs.KUBERNETES_SERVICE_IP) in ipaddress.ip_network(
        certs.SERVICE_CLUSTER_IP_RANGE
    )
    assert _eku(cert) == [ExtendedKeyUsageOID.SERVER_AUTH]
    cert.verify_directly_issued_by(pki.ca.certificate)


@pytest.mark.parametrize(
    ("attr", "cn", "orgs"),
    [
        ("admin", "infercrane-admin", ["system:masters"]),
        ("provider", "infercrane-provider", []),
        ("controller_manager", "system:kube-controller-manager", ["system:masters"]),
    ],
)
def test_client_identities(pki: certs.ClusterPki, attr: str, cn: str, orgs: list[str]) -> None:
    pair: certs.KeyPair = getattr(pki, attr)
    cert = pair.certificate
    assert _cn(cert) == cn
    # Groups come from O; the provider must carry none so it has no implicit rights.
    assert _orgs(cert) == orgs
    assert _eku(cert) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(pki.ca.certificate)
    key = serialization.load_pem_private_key(pair.key_pem, password=None)
    assert key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == cert.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_controller_manager_serving_cert(pki: certs.ClusterPki) -> None:
    cert = pki.controller_manager_serving.certificate
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "127.0.0.1" in {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    cert.verify_directly_issued_by(pki.ca.certificate)


def test_service_account_keys_match(pki: certs.ClusterPki) -> None:
    private = serialization.load_pem_private_key(pki.service_account.private_pem, password=None)
    public = serialization.load_pem_public_key(pki.service_account.public_pem)
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]


def test_each_cluster_gets_its_own_ca() -> None:
    a, b = certs.generate_ca(), certs.generate_ca()
    assert a.cert_pem != b.cert_pem


def test_kubeconfig_contexts_and_no_default(pki: certs.ClusterPki, tmp_path: Path) -> None:
    config = build_kubeconfig(
        "https://127.0.0.1:6443",
        pki.ca.cert_pem,
        {ADMIN_CONTEXT: pki.admin, PROVIDER_CONTEXT: pki.provider},
    )
    path = write_kubeconfig(tmp_path / "kubeconfig", config)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = yaml.safe_load(path.read_text())

    assert "current-context" not in loaded
    assert [c["name"] for c in loaded["clusters"]] == [CLUSTER_NAME] == ["infercrane-local"]
    contexts = {c["name"]: c["context"] for c in loaded["contexts"]}
    assert contexts == {
        "infercrane-admin": {"cluster": "infercrane-local", "user": "infercrane-admin"},
        "infercrane-provider": {"cluster": "infercrane-local", "user": "infercrane-provider"},
    }
    cluster = loaded["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == pki.ca.cert_pem
    users = {u["name"]: u["user"] for u in loaded["users"]}
    provider_cert = x509.load_pem_x509_certificate(
        base64.b64decode(users["infercrane-provider"]["client-certificate-data"])
    )
    assert _cn(provider_cert) == "infercrane-provider"
    admin_cert = x509.load_pem_x509_certificate(
        base64.b64decode(users["infercrane-admin"]["client-certificate-data"])
    )
    assert _orgs(admin_cert) == ["system:masters"]


def test_kubeconfig_loads_in_kubernetes_client_by_context(
    pki: certs.ClusterPki, tmp_path: Path
) -> None:
    from kubernetes import config

    path = write_kubeconfig(
        tmp_path / "kubeconfig",
        build_kubeconfig(
            "https://127.0.0.1:6443",
            pki.ca.cert_pem,
            {ADMIN_CONTEXT: pki.admin, PROVIDER_CONTEXT: pki.provider},
        ),
    )
    for context in (ADMIN_CONTEXT, PROVIDER_CONTEXT):
        client = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(path), context=context, persist_config=False
        )
        with client:
            assert client.configuration.host == "https://127.0.0.1:6443"
            cert = x509.load_pem_x509_certificate(Path(client.configuration.cert_file).read_bytes())
            assert _cn(cert) == f"infercrane-{context.split('-')[1]}"


def test_kubeconfig_current_context_must_be_a_user(pki: certs.ClusterPki) -> None:
    with pytest.raises(ValueError, match="current_context"):
        build_kubeconfig("https://x", pki.ca.cert_pem, {"a": pki.admin}, current_context="b")
    config = build_kubeconfig("https://x", pki.ca.cert_pem, {"a": pki.admin}, current_context="a")
    assert config["current-context"] == "a"


def test_free_ports_are_distinct_loopback_and_bindable() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8
    assert all(1024 <= p <= 65535 for p in ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
    assert isinstance(free_port(), int)
    assert free_ports(0) == []
    with pytest.raises(ValueError):
        free_ports(-1)
