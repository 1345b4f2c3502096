"""How the local control plane runs the KServe controller (``kserve-manager``, KServe v0.20.0
from ``hack/tools``): what is installed before it starts, and its command line. A Kind cluster
installs the same CRDs and ConfigMap, and upstream's webhooks pointed at a Service instead
(:mod:`infercrane_dev.kind.kserve`).

Installed first, as admin, from the toolchain's verbatim copies of upstream's files
(``<bin dir>/kserve/``): the CRDs; the namespace ``kserve`` with the ``inferenceservice-config``
ConfigMap set to Standard mode and no Ingress (upstream's file says Serverless, which needs
Knative); and the webhook configurations, pointed at the manager on loopback by URL with this
cluster's CA as ``caBundle`` (upstream points them at a Service and has cert-manager inject the
CA). The Pod mutator fails open, so no Pod waits for a stopped controller; the InferenceService
defaulter and validators fail closed, as upstream's do. The manager runs as a cluster
administrator: upstream's RBAC (``config/rbac``) is not what is under test here.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .crds import apply_crd, load_crds, wait_established
from .ports import LOOPBACK

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

NAMESPACE = "kserve"  # the manager's POD_NAMESPACE, where it reads its ConfigMap
CONFIG_MAP = "inferenceservice-config"
MANAGER_USER = "infercrane-kserve-manager"
POD_MUTATOR = "inferenceservice.kserve-webhook-server.pod-mutator"


@dataclass(frozen=True)
class KServeFiles:
    """Upstream's YAML as the toolchain copied it, beside ``kserve-manager``."""

    root: Path

    @classmethod
    def beside(cls, manager: Path) -> KServeFiles:
        return cls(manager.parent / "kserve")

    @property
    def crds(self) -> list[Path]:
        return sorted((self.root / "crds").glob("*.yaml"))

    @property
    def webhooks(self) -> Path:
        return self.root / "webhook.yaml"

    @property
    def config(self) -> Path:
        return self.root / "inferenceservice-config.yaml"

    def install(self, relative: str) -> Path:
        """Upstream's ``config/<relative>``, what its kustomize installs to run the manager in a
        cluster (``hack/tools`` copies the few files a Kind cluster needs)."""
        return self.root / "install" / relative


def serving_cert_dir(tmp: Path) -> Path:
    """Where the manager's webhook server reads ``tls.crt`` and ``tls.key``: controller-runtime's
    default under the process's TMPDIR (there is no flag)."""
    return tmp / "k8s-webhook-server" / "serving-certs"


def manager_args(kubeconfig: Path, webhook_port: int, health_port: int) -> list[str]:
    return [
        f"-kubeconfig={kubeconfig}",
        f"-webhook-port={webhook_port}",
        f"-health-probe-addr={LOOPBACK}:{health_port}",
        "-metrics-addr=0",  # off: nothing scrapes it
    ]


def manager_env(tmp: Path) -> dict[str, str]:
    return {"POD_NAMESPACE": NAMESPACE, "TMPDIR": str(tmp)}


def standard_config(document: Mapping[str, Any]) -> dict[str, Any]:
    """Upstream's ConfigMap with Standard as the default mode and no Ingress created."""
    data = dict(document["data"])
    data["deploy"] = json.dumps(json.loads(data["deploy"]) | {"defaultDeploymentMode": "Standard"})
    data["ingress"] = json.dumps(json.loads(data["ingress"]) | {"disableIngressCreation": True})
    metadata = {"name": CONFIG_MAP, "namespace": NAMESPACE}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


ClientConfig = Callable[[Mapping[str, Any]], dict[str, Any]]


def by_url(url: str) -> ClientConfig:
    """Each webhook called at ``url`` + the path upstream's Service reference names."""
    return lambda service: {"url": url + service["path"]}


def webhook_configurations(
    documents: Iterable[Mapping[str, Any]],
    *,
    client_config: ClientConfig,
    ca_pem: bytes,
    fail_open: Collection[str] = (),
) -> list[dict[str, Any]]:
    """Upstream's webhook configurations, each webhook's ``clientConfig`` made from upstream's
    Service reference (whose name and namespace are kustomize placeholders) and trusting
    ``ca_pem``; the webhooks named in ``fail_open`` fail open."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    found = []
    for document in documents:
        webhooks = []
        for webhook in document["webhooks"]:
            config = client_config(webhook["clientConfig"]["service"]) | {"caBundle": bundle}
            changed = dict(webhook) | {"clientConfig": config}
            if webhook["name"] in fail_open:
                changed["failurePolicy"] = "Ignore"
            webhooks.append(changed)
        metadata = {"name": document["metadata"]["name"]}
        found.append(dict(document) | {"metadata": metadata, "webhooks": webhooks})
    return found


def install(
    api_client: ApiClient, files: KServeFiles, *, webhook_url: str, ca_pem: bytes, timeout: float
) -> None:
    """What the manager needs before it starts: CRDs (Established), its namespace and
    ConfigMap, its webhook configurations (called on loopback; the Pod mutator fails open, so
    no Pod waits for a stopped controller)."""
    install_api(api_client, files, timeout=timeout)
    documents = webhook_configurations(
        load_webhooks(files),
        client_config=by_url(webhook_url),
        ca_pem=ca_pem,
        fail_open=[POD_MUTATOR],
    )
    create_webhooks(api_client, documents)


def load_webhooks(files: KServeFiles) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(files.webhooks.read_text(encoding="utf-8")) if d]


def install_api(api_client: ApiClient, files: KServeFiles, *, timeout: float) -> None:
    """KServe's CRDs (Established), its namespace and the ConfigMap in Standard mode."""
    from kubernetes.client import ApiextensionsV1Api, CoreV1Api

    extensions = ApiextensionsV1Api(api_client)
    names = [apply_crd(extensions, crd) for path in files.crds for crd in load_crds(path)]
    deadline = time.monotonic() + timeout
    for name in names:
        wait_established(extensions, name, timeout=max(0.0, deadline - time.monotonic()))
    # The client takes JSON documents as well as its models (hence the ignores).
    core = CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": NAMESPACE}})  # type: ignore[arg-type]
    config = standard_config(yaml.safe_load(files.config.read_text(encoding="utf-8")))
    core.create_namespaced_config_map(NAMESPACE, config)  # type: ignore[arg-type]


def create_webhooks(api_client: ApiClient, documents: Iterable[Mapping[str, Any]]) -> None:
    from kubernetes.client import AdmissionregistrationV1Api

    admission = AdmissionregistrationV1Api(api_client)
    for document in documents:
        if document["kind"] == "MutatingWebhookConfiguration":
            admission.create_mutating_webhook_configuration(document)  # type: ignore[arg-type]
        else:
            admission.create_validating_webhook_configuration(document)  # type: ignore[arg-type]
