"""KServe inside a Kind cluster, run as a user's cluster runs it (``up --kserve``).

KServe v0.20.0's manager (``kserve-manager`` from the tools bin dir, built from the pinned
module) is packed by our image builder as ``/manager``, the command upstream's Deployment runs,
under upstream's distroless user (65532), and runs as upstream's own Deployment, behind its
webhook Service, as its ServiceAccount with its ClusterRole (``config/manager``,
``config/webhook/service.yaml`` and ``config/rbac``, which ``hack/tools`` copies verbatim):
namespaced into ``kserve`` as upstream's kustomize does, with two changes: our image's
digest-pinned reference and ``IfNotPresent`` (upstream's ``Always`` would pull, and there is no
registry here). Upstream's kube-rbac-proxy sidecar (``manager_auth_proxy_patch.yaml``) is left
out: its image is not built here, and only the metrics endpoint is behind it.

No cert-manager: the webhook certificate is issued here for the Service's DNS names by a CA
made for this cluster (:mod:`infercrane_dev.localcluster.certs`), stored in the Secret
upstream's Deployment mounts, and that CA is the ``caBundle`` of upstream's webhook
configurations, whose kustomize placeholders are filled with the Service. Their failure
policies stay upstream's. The CRDs and ``inferenceservice-config`` (Standard mode, no Ingress)
are installed as on the local control plane (:mod:`infercrane_dev.localcluster.kserve`).

Everything here but :func:`install` is pure. Nothing here outlives the cluster: its CA is never
written to disk.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infercrane_dev.images.catalog import ROOTFS, Executable, ImageSpec, Layer
from infercrane_dev.localcluster import kserve
from infercrane_dev.localcluster.certs import KeyPair, generate_ca, issue_serving_cert
from infercrane_dev.localcluster.kserve import KServeFiles

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

NAMESPACE = kserve.NAMESPACE
REPOSITORY = "infercrane.local/kserve/kserve-controller"
MANAGER = "kserve-manager"  # the binary in the tools bin dir
MANAGER_PATH = "/manager"  # what upstream's Deployment runs
NONROOT = "65532:65532"  # distroless's nonroot, upstream's image's user
# What upstream's kustomize config/default applies to run the manager.
INSTALL_FILES = (
    "rbac/service_account.yaml",
    "rbac/role.yaml",
    "rbac/role_binding.yaml",
    "rbac/leader_election_role.yaml",
    "rbac/leader_election_role_binding.yaml",
    "webhook/service.yaml",
    "manager/manager.yaml",
)
# Created in this order, so that the manager's Pod starts with its identity and certificate.
KIND_ORDER = (
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Secret",
    "Service",
    "Deployment",
)
CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding")
CERT_VOLUME = "cert"  # upstream's Deployment mounts the webhook certificate's Secret as this
# The manager's Go build info names the KServe module it was built from (the image's tag).
_KSERVE_MODULE = re.compile(rb"\tgithub\.com/kserve/kserve\t(v[0-9][^\t\n]*)")


class KServeInstallError(RuntimeError):
    """Upstream's files are not what this module expects (one line)."""


def manager_image() -> ImageSpec:
    layer = Layer((Executable(MANAGER_PATH.lstrip("/"), MANAGER),))
    return ImageSpec(MANAGER, (ROOTFS, layer), (MANAGER_PATH,), user=NONROOT)


def manager_version(binary: Path) -> str:
    """The KServe version ``binary`` was built from (its module in Go's build info)."""
    found = _KSERVE_MODULE.search(binary.read_bytes())
    if found is None:
        raise KServeInstallError(f"{binary}: no github.com/kserve/kserve module in its build info")
    return found.group(1).decode()


def _documents(files: KServeFiles) -> list[dict[str, Any]]:
    return [
        document
        for relative in INSTALL_FILES
        for document in yaml.safe_load_all(files.install(relative).read_text(encoding="utf-8"))
        if document
    ]


def _namespaced(document: Mapping[str, Any]) -> dict[str, Any]:
    """As kustomize's ``namespace: kserve`` makes it: namespaced objects and the
    ServiceAccounts bindings name."""
    made = copy.deepcopy(dict(document))
    if made["kind"] not in CLUSTER_SCOPED:
        made["metadata"]["namespace"] = NAMESPACE
    for subject in made.get("subjects") or []:
        if subject.get("kind") == "ServiceAccount":
            subject["namespace"] = NAMESPACE
    return made


def _one(documents: Iterable[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in documents if d["kind"] == kind]
    if len(found) != 1:
        raise KServeInstallError(f"upstream's install files hold {len(found)} {kind}s, not one")
    return found[0]


def _run_ours(deployment: dict[str, Any], image: str) -> str:
    """Our image in upstream's Deployment, never pulled; the certificate Secret's name."""
    pod = deployment["spec"]["template"]["spec"]
    [manager] = [c for c in pod["containers"] if c["name"] == "manager"]
    manager |= {"image": image, "imagePullPolicy": "IfNotPresent"}
    [volume] = [v for v in pod["volumes"] if v["name"] == CERT_VOLUME]
    return str(volume["secret"]["secretName"])


def service_names(service: str) -> list[str]:
    """Every name the Service answers to in the cluster (the API server calls the ``.svc``)."""
    base = f"{service}.{NAMESPACE}"
    return [service, base, f"{base}.svc", f"{base}.svc.cluster.local"]


def certificate_secret(name: str, pair: KeyPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "stringData": {"tls.crt": pair.cert_pem.decode(), "tls.key": pair.key_pem.decode()},
    }


def by_service(name: str, port: int) -> kserve.ClientConfig:
    """Each webhook called through the Service ``name`` (kustomize's placeholders filled)."""
    return lambda service: {
        "service": {"name": name, "namespace": NAMESPACE, "path": service["path"], "port": port}
    }


def install_objects(
    files: KServeFiles, *, image: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The manager's objects in creation order (its certificate's Secret before its
    Deployment), and the webhook configurations, from upstream's files."""
    documents = [_namespaced(d) for d in _documents(files)]
    unknown = sorted({d["kind"] for d in documents} - set(KIND_ORDER))
    if unknown:
        raise KServeInstallError(f"upstream's install files hold kinds not planned for: {unknown}")
    secret = _run_ours(_one(documents, "Deployment"), image)
    service = _one(documents, "Service")
    [port] = [p["port"] for p in service["spec"]["ports"]]
    ca = generate_ca("infercrane-kserve-webhook-ca")
    names = service_names(service["metadata"]["name"])
    serving = issue_serving_cert(ca, names[2], names, ())
    objects = sorted(
        [*documents, certificate_secret(secret, serving)], key=lambda d: KIND_ORDER.index(d["kind"])
    )
    webhooks = kserve.webhook_configurations(
        kserve.load_webhooks(files),
        client_config=by_service(service["metadata"]["name"], port),
        ca_pem=ca.cert_pem,
    )
    return objects, webhooks


def install(api_client: ApiClient, files: KServeFiles, *, image: str, timeout: float) -> str:
    """KServe's CRDs and ConfigMap, the manager's objects and the webhook configurations;
    returns the Deployment's name (the caller waits for it)."""
    from kubernetes import utils

    objects, webhooks = install_objects(files, image=image)
    kserve.install_api(api_client, files, timeout=timeout)
    for document in objects:
        utils.create_from_dict(api_client, document)  # type: ignore[no-untyped-call]
    kserve.create_webhooks(api_client, webhooks)
    return str(objects[-1]["metadata"]["name"])
