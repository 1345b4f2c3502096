"""In-memory PKI for the disposable local control plane.

Everything here is throwaway: a fresh CA per cluster, short-lived certificates,
unencrypted keys written only inside the cluster's temporary directory.  This
module must never be used for anything that outlives a local test cluster, and
it must not touch the filesystem itself (callers decide where PEM bytes go).

Identities matter for the project's tests: the *admin* is in ``system:masters``
(full rights), while the *provider* identity carries no group at all, so that
it can only do what the project's shipped RBAC Role grants it.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ADMIN_USER = "infercrane-admin"
ADMIN_GROUPS: tuple[str, ...] = ("system:masters",)
PROVIDER_USER = "infercrane-provider"
PROVIDER_GROUPS: tuple[str, ...] = ()
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
# With --use-service-account-credentials=false every controller (garbage
# collector, namespace deleter, ReplicaSet ...) runs as this one user, but the
# bootstrap role for it only covers the controller manager's own bookkeeping;
# the per-controller rights live in roles bound to per-controller service
# accounts.  Full rights are the simple, honest equivalent for a throwaway cluster.
CONTROLLER_MANAGER_GROUPS: tuple[str, ...] = ("system:masters",)
# The scheduler's bootstrap ClusterRoles (system:kube-scheduler, system:volume-scheduler)
# are bound to exactly this user, so it needs no group.
SCHEDULER_USER = "system:kube-scheduler"
SCHEDULER_GROUPS: tuple[str, ...] = ()
# kwok plays every kubelet of the simulated nodes (node status, leases, pod status, pod
# deletion).  Without the Node authorizer there is no narrower built-in identity for that.
KWOK_USER = "infercrane-kwok"
KWOK_GROUPS: tuple[str, ...] = ("system:masters",)
# The API server's identity towards kubelets (logs, exec); only a real node checks it.
APISERVER_KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
# A real node's kubelet is ``system:node:<node name>`` (:func:`kubelet_user`) in this group, and
# its kube-proxy the user the built-in ``system:node-proxier`` binding names.
KUBELET_GROUPS: tuple[str, ...] = ("system:nodes",)
KUBE_PROXY_USER = "system:kube-proxy"

# The apiserver's --service-cluster-ip-range.  A /12 (as kubeadm and Kind use) holds about
# a million Services; the former /24 filled after ~250, which many-replica scenarios reach.
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/12"
# In-cluster clients reach the apiserver through the range's first address, so it must be
# in the serving cert; derived, so the two can never disagree.
KUBERNETES_SERVICE_IP = str(next(ipaddress.ip_network(SERVICE_CLUSTER_IP_RANGE).hosts()))

APISERVER_DNS_NAMES: tuple[str, ...] = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
APISERVER_IPS: tuple[str, ...] = ("127.0.0.1", "::1", KUBERNETES_SERVICE_IP)

_VALIDITY = datetime.timedelta(days=7)
# Tolerate small clock differences between processes verifying the certs.
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate and its unencrypted PKCS#8 PEM private key."""

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)


@dataclass(frozen=True)
class CertificateAuthority:
    """A self-signed CA that signs every other certificate of one cluster."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _private_pem(self.key)


@dataclass(frozen=True)
class ServiceAccountKeys:
    """Signing key for service-account tokens and the public half used to verify them."""

    private_pem: bytes
    public_pem: bytes


def load_ca(cert_pem: bytes, key_pem: bytes) -> CertificateAuthority:
    """The CA of a running cluster, read back from its PEM files (to issue more certs)."""
    key = serialization.load_pem_private_key(key_pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the cluster CA key is not an EC key")
    return CertificateAuthority(key=key, certificate=x509.load_pem_x509_certificate(cert_pem))


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256 keys are generated in microseconds (RSA takes ~100 ms each) and are
    # accepted by etcd, the apiserver, the controller manager and Python's ssl.
    return ec.generate_private_key(ec.SECP256R1())


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: Any, *, ca: bool
) -> x509.CertificateBuilder:
    """What every certificate here shares; ``ca`` decides whether it may sign others."""
    now = _now()
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(usage, critical=True)
    )


def generate_ca(common_name: str = "infercrane-local-ca") -> CertificateAuthority:
    key = _new_key()
    subject = _name(common_name)
    cert = (
        _builder(subject, subject, key.public_key(), ca=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(key=key, certificate=cert)


def _issue(
    ca: CertificateAuthority,
    subject: x509.Name,
    usages: Sequence[x509.ObjectIdentifier],
    san: x509.SubjectAlternativeName | None,
) -> KeyPair:
    key = _new_key()
    builder = (
        _builder(subject, ca.certificate.subject, key.public_key(), ca=False)
        .add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    cert = builder.sign(ca.key, hashes.SHA256())
    return KeyPair(
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=_private_pem(key),
    )


def issue_serving_cert(
    ca: CertificateAuthority,
    common_name: str,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
) -> KeyPair:
    """A TLS server certificate valid for the given names and addresses."""
    san = x509.SubjectAlternativeName(
        [x509.DNSName(name) for name in dns_names]
        + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    )
    return _issue(ca, _name(common_name), [ExtendedKeyUsageOID.SERVER_AUTH], san)


def issue_apiserver_serving_cert(ca: CertificateAuthority) -> KeyPair:
    """The kube-apiserver's serving cert: loopback plus the in-cluster service names."""
    return issue_serving_cert(ca, "kube-apiserver", APISERVER_DNS_NAMES, APISERVER_IPS)


def issue_client_cert(
    ca: CertificateAuthority,
    common_name: str,
    organizations: Sequence[str] = (),
) -> KeyPair:
    """A client certificate; the apiserver maps CN to the user and each O to a group."""
    return _issue(ca, _name(common_name, organizations), [ExtendedKeyUsageOID.CLIENT_AUTH], None)


def kubelet_user(node_name: str) -> str:
    """The user a real node's kubelet authenticates as."""
    return f"system:node:{node_name}"


def generate_service_account_keys() -> ServiceAccountKeys:
    key = _new_key()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return ServiceAccountKeys(private_pem=_private_pem(key), public_pem=public)


@dataclass(frozen=True)
class ClusterPki:
    """Every credential one local cluster needs, generated together."""

    ca: CertificateAuthority
    apiserver_serving: KeyPair
    controller_manager_serving: KeyPair
    scheduler_serving: KeyPair
    admin: KeyPair
    provider: KeyPair
    controller_manager: KeyPair
    scheduler: KeyPair
    kwok: KeyPair
    apiserver_kubelet_client: KeyPair
    service_account: ServiceAccountKeys


def generate_cluster_pki() -> ClusterPki:
    ca = generate_ca()
    return ClusterPki(
        ca=ca,
        apiserver_serving=issue_apiserver_serving_cert(ca),
        controller_manager_serving=issue_serving_cert(
            ca, "kube-controller-manager", ["localhost"], ["127.0.0.1"]
        ),
        scheduler_serving=issue_serving_cert(ca, "kube-scheduler", ["localhost"], ["127.0.0.1"]),
        admin=issue_client_cert(ca, ADMIN_USER, ADMIN_GROUPS),
        provider=issue_client_cert(ca, PROVIDER_USER, PROVIDER_GROUPS),
        controller_manager=issue_client_cert(
            ca, CONTROLLER_MANAGER_USER, CONTROLLER_MANAGER_GROUPS
        ),
        scheduler=issue_client_cert(ca, SCHEDULER_USER, SCHEDULER_GROUPS),
        kwok=issue_client_cert(ca, KWOK_USER, KWOK_GROUPS),
        apiserver_kubelet_client=issue_client_cert(ca, APISERVER_KUBELET_CLIENT_USER),
        service_account=generate_service_account_keys(),
    )
