"""Add, list and delete simulated GPU nodes on a running local control plane, as admin.

Scenario tests grow and shrink the cluster under a running workload (a pool appears, a node
disappears).  These are the thin I/O wrappers around :mod:`.nodepools`' pure builders; they
only ever touch Nodes carrying the simulated-node label, never any other Node.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from kubernetes.client import ApiClient, CoreV1Api
from kubernetes.client.exceptions import ApiException

from .nodepools import (
    DEFAULT_PRODUCT_LABEL,
    SIMULATED_LABEL,
    SIMULATED_VALUE,
    NodePool,
    PoolNode,
    pool_manifests,
    pool_node,
)

_SIMULATED_SELECTOR = f"{SIMULATED_LABEL}={SIMULATED_VALUE}"
_POLL = 0.2


class NodeOperationError(RuntimeError):
    """A node operation was refused or did not finish in time."""


def _core(api: ApiClient) -> CoreV1Api:
    return CoreV1Api(api)


def _summaries(api: ApiClient, selector: str, product_label: str) -> list[PoolNode]:
    items = _core(api).list_node(label_selector=selector).items
    # The builders work on the API's JSON form, which is what the unit tests feed them.
    as_json = [api.sanitize_for_serialization(item) for item in items]  # type: ignore[no-untyped-call]
    return sorted(
        (pool_node(node, product_label=product_label) for node in as_json),
        key=lambda node: node.name,
    )


def list_simulated_nodes(
    api: ApiClient, *, product_label: str = DEFAULT_PRODUCT_LABEL
) -> list[PoolNode]:
    """Every simulated Node, sorted by name."""
    return _summaries(api, _SIMULATED_SELECTOR, product_label)


def list_pool_nodes(
    api: ApiClient, product: str, *, product_label: str = DEFAULT_PRODUCT_LABEL
) -> list[PoolNode]:
    """The simulated Nodes labelled with GPU ``product``, sorted by name."""
    return _summaries(api, f"{_SIMULATED_SELECTOR},{product_label}={product}", product_label)


def add_node_pool(
    api: ApiClient,
    pool: NodePool,
    *,
    product_label: str = DEFAULT_PRODUCT_LABEL,
    wait_ready: float | None = 60.0,
    labels: Mapping[str, str] | None = None,
) -> list[str]:
    """Create ``pool``'s Nodes (after any existing ones), with ``labels``; return their names.

    With ``wait_ready`` (seconds), also wait until kwok made each one Ready and the node
    lifecycle controller lifted its not-ready taint, i.e. until the scheduler can use it.
    """
    existing = [n.name for n in list_simulated_nodes(api, product_label=product_label)]
    manifests = pool_manifests(pool, existing, product_label=product_label, labels=labels)
    core = _core(api)
    for manifest in manifests:
        core.create_node(manifest)  # type: ignore[arg-type]  # the client takes JSON dicts
    names = [str(m["metadata"]["name"]) for m in manifests]
    if wait_ready is not None:
        wait_nodes_usable(api, names, timeout=wait_ready, product_label=product_label)
    return names


def wait_nodes_usable(
    api: ApiClient,
    names: Iterable[str],
    *,
    timeout: float,
    product_label: str = DEFAULT_PRODUCT_LABEL,
) -> None:
    """Poll until every named Node is Ready and schedulable, or raise after ``timeout``."""
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while True:
        usable = {
            n.name
            for n in list_simulated_nodes(api, product_label=product_label)
            if n.ready and n.schedulable
        }
        missing = wanted - usable
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise NodeOperationError(
                f"nodes not Ready and schedulable after {timeout:.0f}s: {sorted(missing)} "
                "(is kwok running? see its log in the control plane's workdir)"
            )
        time.sleep(_POLL)


def delete_node(api: ApiClient, name: str, *, wait_gone: float | None = 30.0) -> None:
    """Delete simulated Node ``name`` (refuses any other Node).

    Its Pods are then handled as on a real cluster when a machine disappears: the pod
    garbage collector of kube-controller-manager deletes them (after its ~40 s quarantine)
    and their controllers create replacements.
    """
    core = _core(api)
    try:
        node = core.read_node(name)
    except ApiException as error:
        if error.status == 404:
            raise NodeOperationError(f"node {name} does not exist") from None
        raise
    labels = (node.metadata.labels or {}) if node.metadata is not None else {}
    if labels.get(SIMULATED_LABEL) != SIMULATED_VALUE:
        raise NodeOperationError(f"node {name} is not a simulated node; refusing to delete it")
    core.delete_node(name)
    if wait_gone is None:
        return
    deadline = time.monotonic() + wait_gone
    while True:
        try:
            core.read_node(name)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        if time.monotonic() >= deadline:
            raise NodeOperationError(f"node {name} still exists after {wait_gone:.0f}s")
        time.sleep(_POLL)
