"""Install CustomResourceDefinitions into the local cluster and wait for them.

Tests create custom resources right after installing a CRD (e.g. a KServe
fixture); until the CRD is Established the apiserver answers 404 for its
resources, so installation is only complete once that condition is True.
This module only handles ``apiextensions.k8s.io/v1`` CRDs and refuses any
other kind rather than applying arbitrary manifests.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"


class CrdError(RuntimeError):
    """A CRD could not be applied or did not become Established."""


def load_crds(path: Path) -> list[dict[str, Any]]:
    """Every CRD document in a (multi-document) YAML file; other kinds are an error."""
    documents = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    if not documents:
        raise CrdError(f"{path} contains no YAML documents")
    for document in documents:
        if not isinstance(document, dict):
            raise CrdError(f"{path}: expected mappings, got {type(document).__name__}")
        if document.get("apiVersion") != CRD_API_VERSION or document.get("kind") != CRD_KIND:
            raise CrdError(
                f"{path}: only {CRD_API_VERSION} {CRD_KIND} documents are accepted, "
                f"got {document.get('apiVersion')} {document.get('kind')}"
            )
        if not document.get("metadata", {}).get("name"):
            raise CrdError(f"{path}: a CRD has no metadata.name")
    return documents


def is_established(crd: dict[str, Any]) -> bool:
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def _read_raw(api: Any, name: str) -> dict[str, Any]:
    # Raw JSON: the generated models reject some valid CRD statuses when deserialising.
    response = api.read_custom_resource_definition(name, _preload_content=False)
    data: dict[str, Any] = json.loads(response.data)
    return data


def apply_crd(api: Any, document: dict[str, Any]) -> str:
    """Create the CRD, or replace it if it already exists; returns its name."""
    from kubernetes.client.exceptions import ApiException

    name = str(document["metadata"]["name"])
    try:
        api.create_custom_resource_definition(body=document)
    except ApiException as exc:
        if exc.status != 409:
            raise CrdError(f"creating CRD {name}: {exc.status} {exc.reason}: {exc.body}") from exc
        current = _read_raw(api, name)
        body = json.loads(json.dumps(document))
        # Optimistic concurrency: replace exactly the version we just read.
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        api.replace_custom_resource_definition(name, body=body)
    return name


def wait_established(api: Any, name: str, *, timeout: float, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while True:
        crd = _read_raw(api, name)
        if is_established(crd):
            return
        if time.monotonic() >= deadline:
            conditions = crd.get("status", {}).get("conditions")
            raise CrdError(f"CRD {name} not Established after {timeout:.0f}s: {conditions}")
        time.sleep(interval)


def install_crd(
    api_client: ApiClient,
    path: Path,
    *,
    timeout: float = 60.0,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """Apply every CRD in ``path`` with ``api_client`` and wait until all are Established.

    ``labels`` are added to each CRD's own, so a test run can find what it installed.
    """
    from kubernetes.client import ApiextensionsV1Api

    api = ApiextensionsV1Api(api_client)
    documents = load_crds(path)
    for document in documents:
        meta = document["metadata"]
        meta["labels"] = meta.get("labels", {}) | dict(labels or {})
    names = [apply_crd(api, document) for document in documents]
    deadline = time.monotonic() + timeout
    for name in names:
        wait_established(api, name, timeout=max(0.0, deadline - time.monotonic()))
    return names
