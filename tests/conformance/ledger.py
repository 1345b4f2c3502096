"""What one conformance run created, found by its run id, removed and proven gone at the end.

Every object the suite creates carries ``infercrane.dev/conformance-run=<run id>``: namespaces
and everything bootstrapped in them, CRDs, simulated nodes. At the end of the session the run
deletes exactly what carries its own id, waits for it to go, and lists what is left anywhere
in the cluster; anything left fails the session. Objects of another run (say, the namespace
of an interrupted one) carry another id and are never deleted.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster.bootstrap import Bootstrapped, bootstrap_namespace
from infercrane_dev.localcluster.crds import wait_established
from infercrane_pulumi.config.intents import WorkloadApiName

RUN_LABEL = "infercrane.dev/conformance-run"
# On a real cluster terminating Pods get their grace period before a namespace can go.
SWEEP_SECONDS = 300.0
_POLL = 0.5


class LeftoverError(AssertionError):
    """Objects of this run are still in the cluster after the sweep."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:8]


def _ignore_gone(call: Callable[[], object]) -> None:
    """Deleting what is already gone (404) or already going (409) is what we wanted."""
    try:
        call()
    except ApiException as error:
        if error.status not in (404, 409):
            raise


class RunLedger:
    def __init__(self, admin: client.ApiClient, run_id: str | None = None) -> None:
        self.admin = admin
        self.run_id = run_id or new_run_id()

    @property
    def labels(self) -> dict[str, str]:
        return {RUN_LABEL: self.run_id}

    @property
    def selector(self) -> str:
        return f"{RUN_LABEL}={self.run_id}"

    # -- creating ----------------------------------------------------------------------

    def namespace_name(self, prefix: str = "ic") -> str:
        """Unique and traceable: the run id is in the name as well as in the label."""
        return f"{prefix}-{self.run_id}-{uuid.uuid4().hex[:6]}"

    def create_namespace(self, prefix: str = "ic") -> str:
        name = self.namespace_name(prefix)
        client.CoreV1Api(self.admin).create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=self.labels))
        )
        return name

    def bootstrap(
        self,
        namespace: str | None = None,
        *,
        workload_api: WorkloadApiName = "deployment",
        observe: bool = False,
        bind_to: Sequence[Mapping[str, str]] = (),
    ) -> Bootstrapped:
        """A namespace set up from ``deploy/kubernetes``; ``bind_to`` adds further subjects."""
        return bootstrap_namespace(
            self.admin,
            namespace or self.namespace_name(),
            deploy_dir=DEPLOY_DIR,
            workload_api=workload_api,
            observe=observe,
            bind_to=bind_to,
            labels=self.labels,
        )

    def create_crd(self, document: Mapping[str, Any], *, timeout: float = 60.0) -> bool:
        """Create the CRD with this run's label and wait until Established.

        False if a CRD of that name already exists: it is someone else's, and left alone.
        """
        body = json.loads(json.dumps(document))
        body["metadata"]["labels"] = body["metadata"].get("labels", {}) | self.labels
        api = client.ApiextensionsV1Api(self.admin)
        try:
            api.create_custom_resource_definition(body)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        wait_established(api, body["metadata"]["name"], timeout=timeout)
        return True

    # -- removing ----------------------------------------------------------------------

    def is_ours(self, metadata: Mapping[str, Any] | None) -> bool:
        return ((metadata or {}).get("labels") or {}).get(RUN_LABEL) == self.run_id

    def delete_namespace(self, name: str) -> None:
        """Start deleting ``name`` (background); refuses a namespace this run did not make."""
        core = client.CoreV1Api(self.admin)
        self._refuse_unless_ours("namespace", read_raw(core.read_namespace, name))
        _ignore_gone(lambda: core.delete_namespace(name))

    def delete_crd(self, name: str) -> None:
        """Delete CRD ``name`` if this run created it; another's is never touched."""
        api = client.ApiextensionsV1Api(self.admin)
        self._refuse_unless_ours("CRD", read_raw(api.read_custom_resource_definition, name))
        _ignore_gone(lambda: api.delete_custom_resource_definition(name))

    def _refuse_unless_ours(self, kind: str, found: Mapping[str, Any] | None) -> None:
        if found is not None and not self.is_ours(found.get("metadata")):
            name = found["metadata"]["name"]
            raise AssertionError(f"{kind} {name} is not of run {self.run_id}; not deleting it")

    def sweep(self, timeout: float = SWEEP_SECONDS) -> None:
        """Delete this run's namespaces, CRDs and nodes; wait (up to ``timeout``) for all to go.

        Everything else the run made lives in its namespaces and goes with them.
        """
        core = client.CoreV1Api(self.admin)
        extensions = client.ApiextensionsV1Api(self.admin)
        roots: list[tuple[Callable[..., Any], Callable[[str], object]]] = [
            (core.list_namespace, core.delete_namespace),
            (
                extensions.list_custom_resource_definition,
                extensions.delete_custom_resource_definition,
            ),
            (core.list_node, core.delete_node),
        ]
        for listing, delete in roots:
            for item in self._items(listing):
                _ignore_gone(functools.partial(delete, item["metadata"]["name"]))
        deadline = time.monotonic() + timeout
        while any(self.leftovers().values()) and time.monotonic() < deadline:
            time.sleep(_POLL)

    # -- proving -----------------------------------------------------------------------

    def _items(self, listing: Callable[..., Any]) -> list[Any]:
        # Raw JSON: the generated models reject some valid objects (CRD statuses) on reading.
        response = listing(label_selector=self.selector, _preload_content=False)
        items: list[Any] = json.loads(response.data)["items"]
        return items

    def leftovers(self) -> dict[str, list[str]]:
        """Every object anywhere in the cluster that carries this run's label, by kind."""
        core = client.CoreV1Api(self.admin)
        rbac = client.RbacAuthorizationV1Api(self.admin)
        listings: dict[str, Callable[..., Any]] = {
            "namespaces": core.list_namespace,
            "nodes": core.list_node,
            "CRDs": client.ApiextensionsV1Api(self.admin).list_custom_resource_definition,
            "cluster roles": rbac.list_cluster_role,
            "cluster role bindings": rbac.list_cluster_role_binding,
            "role bindings": rbac.list_role_binding_for_all_namespaces,
            "roles": rbac.list_role_for_all_namespaces,
            "service accounts": core.list_service_account_for_all_namespaces,
            "secrets": core.list_secret_for_all_namespaces,
        }
        return {
            kind: [_describe(item["metadata"]) for item in self._items(listing)]
            for kind, listing in listings.items()
        }

    def verify_clean(self) -> str:
        """One line saying nothing of this run remains; raises :class:`LeftoverError` if not."""
        found = self.leftovers()
        counts = ", ".join(f"{len(names)} {kind}" for kind, names in found.items())
        summary = f"leftover check, run {self.run_id} (label {self.selector}): {counts}"
        remaining = {kind: names for kind, names in found.items() if names}
        if remaining:
            raise LeftoverError(f"{summary}; still present: {remaining}")
        return summary


def read_raw(read: Callable[..., Any], name: str) -> dict[str, Any] | None:
    """The object as raw JSON, or None if it does not exist."""
    try:
        response = read(name, _preload_content=False)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    found: dict[str, Any] = json.loads(response.data)
    return found


def _describe(metadata: Mapping[str, Any]) -> str:
    name = "/".join(part for part in (metadata.get("namespace"), metadata["name"]) if part)
    return f"{name} (terminating)" if metadata.get("deletionTimestamp") else name
