"""The API server as this provider asks it: its answers as typed errors, and the requests of one
run (reads, metadata lists, strict dry-runs, deletions by uid, access reviews), over one
transport (``client``, the door; recorded answers in unit tests).

A non-2xx answer is mapped to the project's errors by cause, because a caller retries on the
class alone: an overloaded server (5xx, 429) is retryable; credentials or permissions the server
refused are permanent, each with its own code. Messages are built from the API ``Status``
message only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from infercrane_pulumi.config.kubeconfigs import ClusterIdentity
from infercrane_pulumi.errors import (
    ClusterAuthenticationError,
    ClusterForbiddenError,
    ClusterUnavailableError,
    InferCraneError,
    RejectedError,
)
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.kinds import Kind
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.workloads import KINDS

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
# Metadata only (labels, annotations, managedFields): what ownership decisions read, at a
# fraction of the bytes of whole objects.
METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
LIST_PAGE = 500
# A paged LIST reads one snapshot, which the server keeps only until etcd compacts it (minutes);
# a list that outlives it is read again from its first page, a few times at most.
LIST_RESTARTS = 3


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]


class Transport(Protocol):
    """One HTTP request to the API server. Raises ClusterUnavailableError when the server
    cannot be reached, ClusterTlsError when no TLS session can be had, InternalError otherwise."""

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Response: ...


def subject(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


def object_subject(obj: Manifest) -> str:
    meta = obj["metadata"]
    return subject(obj["kind"], meta["namespace"], meta["name"])


def status_message(response: Response) -> str:
    """The Status message on one line (an admission webhook's may span several)."""
    message = str(response.body.get("message") or response.body.get("reason") or "")
    return " ".join(message.split())[:300] or f"HTTP {response.status}"


def failure(response: Response, what: str) -> InferCraneError | None:
    """The typed error a non-2xx answer means (5xx and 429 are retryable), None for success."""
    if response.status < 300:
        return None
    if response.status >= 500 or response.status == 429:
        return ClusterUnavailableError(f"{what}: API server answered {response.status}, try again")
    if response.status == 401:
        return ClusterAuthenticationError(
            f"{what}: {status_message(response)}; check the credentials of the kubeconfig context"
        )
    if response.status == 403:
        return ClusterForbiddenError(f"{what}: {status_message(response)}")
    return RejectedError(f"{what}: {status_message(response)}")


def raise_for_status(response: Response, what: str) -> None:
    error = failure(response, what)
    if error is not None:
        raise error


@dataclass
class Cluster:
    """One API server under one identity: reads, dry-runs, deletions by uid (the run's own),
    and the one apply outside the engine, the runner's status object (``cluster.runstatus``)."""

    transport: Transport
    context: str = ""
    # The API server this client reaches (None: a recorded transport, in unit tests).
    identity: ClusterIdentity | None = None

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        response = self.transport.request("GET", kind.path(namespace, name))
        if response.status == 404:
            return None
        raise_for_status(response, subject(kind.kind, namespace, name))
        return response.body

    def select(self, kind: Kind, namespace: str, selector: str) -> list[dict[str, Any]]:
        """Matching objects, each with its ``kind`` set (list items come without it)."""
        items = self.list_if_allowed(kind, namespace, selector)
        if items is None:
            raise ClusterForbiddenError(f"list {kind.resource} in {namespace}: forbidden")
        return items

    def list_if_allowed(
        self, kind: Kind, namespace: str, selector: str
    ) -> list[dict[str, Any]] | None:
        """Like ``select``, but None when this identity may not list the kind (403)."""
        response = self.transport.request(
            "GET", kind.collection(namespace), query=[("labelSelector", selector)]
        )
        if response.status == 403:
            return None
        raise_for_status(response, f"list {kind.resource} in {namespace}")
        return [item | {"kind": kind.kind} for item in response.body.get("items") or []]

    def metadata(self, kind: Kind, namespace: str) -> dict[str, dict[str, Any]]:
        """The metadata of every object of ``kind`` in ``namespace``, by name (paged LIST).

        A continue token the server has let expire (410) restarts the list from its first page,
        up to ``LIST_RESTARTS`` times: pages of two snapshots are never mixed.
        """
        what = f"list {kind.resource} in {namespace}"
        found: dict[str, dict[str, Any]] = {}
        token = ""
        restarts = 0
        while True:
            query = [("limit", str(LIST_PAGE))] + ([("continue", token)] if token else [])
            response = self.transport.request(
                "GET", kind.collection(namespace), query=query, accept=METADATA_LIST
            )
            # Whatever its reason, a 410 to a continued page means that snapshot is gone.
            if response.status == 410 and token:
                if restarts == LIST_RESTARTS:
                    raise ClusterUnavailableError(
                        f"{what}: the list expired {restarts + 1} times before its last page; "
                        "try again"
                    )
                restarts += 1
                found, token = {}, ""
                continue
            raise_for_status(response, what)
            for item in response.body.get("items") or []:
                meta = item.get("metadata") or {}
                found[str(meta.get("name"))] = meta
            token = str((response.body.get("metadata") or {}).get("continue") or "")
            if not token:
                return found

    def metadata_if_allowed(self, kind: Kind, namespace: str) -> dict[str, dict[str, Any]] | None:
        """Like ``metadata``, but None when this identity may not list the kind (403)."""
        try:
            return self.metadata(kind, namespace)
        except ClusterForbiddenError:
            return None

    def dry_run_apply(self, obj: Manifest) -> Response:
        return self._apply(KINDS[obj["kind"]], obj, [("dryRun", "All")])

    def apply(self, kind: Kind, obj: Manifest) -> Response:
        """Server-side apply of ``obj`` under the provider's field manager, never forced."""
        return self._apply(kind, obj, [])

    def _apply(self, kind: Kind, obj: Manifest, extra: list[tuple[str, str]]) -> Response:
        meta = obj["metadata"]
        return self.transport.request(
            "PATCH",
            kind.path(meta["namespace"], meta["name"]),
            query=[("fieldManager", naming.FIELD_MANAGER), *extra, ("force", "false")],
            body=obj,
            content_type=APPLY_CONTENT_TYPE,
        )

    def delete(self, obj: Manifest, *, uid: str) -> Response:
        """Delete ``obj`` only if it still has ``uid``, its dependents in the background."""
        meta = obj["metadata"]
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": uid},
        }
        return self.transport.request(
            "DELETE", KINDS[obj["kind"]].path(meta["namespace"], meta["name"]), body=options
        )

    def served(self, kind: Kind) -> bool:
        response = self.transport.request("GET", f"/apis/{kind.group_version}")
        if response.status == 404:
            return False
        raise_for_status(response, f"discovery of {kind.group_version}")
        return any(item.get("name") == kind.plural for item in response.body.get("resources", []))

    def schemas(self, kind: Kind) -> dict[str, Any]:
        """The OpenAPI v3 schemas the API server publishes for ``kind``'s group version, by
        name (every authenticated identity may read them; empty: none published)."""
        prefix = f"/apis/{kind.group_version}" if kind.group else f"/api/{kind.version}"
        response = self.transport.request("GET", f"/openapi/v3{prefix}")
        if response.status == 404:
            return {}
        raise_for_status(response, f"OpenAPI schema of {kind.group_version}")
        return dict((response.body.get("components") or {}).get("schemas") or {})

    def namespace_uid(self, namespace: str) -> str | None:
        """``namespace``'s uid (None: this identity may not read it, or it does not exist)."""
        response = self.transport.request("GET", f"/api/v1/namespaces/{namespace}")
        if response.status in (403, 404):
            return None
        raise_for_status(response, f"namespace {namespace}")
        return str((response.body.get("metadata") or {}).get("uid") or "") or None

    def version(self) -> str:
        response = self.transport.request("GET", "/version")
        raise_for_status(response, "API server version")
        return str(response.body.get("gitVersion", "unknown"))

    def can(self, namespace: str, verb: str, kind: Kind) -> tuple[bool, str]:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "group": kind.group,
                    "resource": kind.plural,
                }
            },
        }
        response = self.transport.request(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body=review
        )
        raise_for_status(response, f"access review {verb} {kind.plural}")
        status = response.body.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason", ""))
