"""GPU nodes for the scenarios whose Pods must actually run.

On the local control plane a test gets simulated node pools (kwok) of GPU products only it
uses (a random suffix), so its nodes never attract another test's Pods; the nodes carry the
run's label and are deleted after the test. On an existing cluster the suite may not add or
delete nodes: a scenario that only needs *some* schedulable GPU node uses one that is there
(its product, its taints tolerated, and a runnable workload the operator names), else skips
saying why.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pytest
from kubernetes import client

from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.nodepools import (
    DEFAULT_PRODUCT_LABEL,
    GPU_RESOURCE,
    NodePool,
    PoolNode,
    pool_node,
)
from tests.conformance.target import GPU_WORKLOAD_ENV

# Taints of a node that is not (yet) usable; tolerating them would hide a broken node.
LIFECYCLE_TAINTS = "node.kubernetes.io/"


@dataclass(frozen=True)
class GpuTarget:
    """Where a scenario's intents can run: a product, its nodes, what the Pods need there."""

    product: str
    nodes: frozenset[str]
    tolerations: tuple[Mapping[str, str], ...] = ()
    workload: Mapping[str, Any] | None = None
    resources: Mapping[str, Any] | None = None

    def settings(self) -> dict[str, Any]:
        """``infercrane:kubernetes`` settings the intents need on these nodes."""
        return (
            {"tolerations": [dict(t) for t in self.tolerations]} if self.tolerations else {}
        ) | ({"resources": dict(self.resources)} if self.resources is not None else {})

    def intent_fields(self) -> dict[str, Any]:
        """Fields of each intent: the runnable workload, where the placeholder cannot run."""
        return {"workload": dict(self.workload)} if self.workload is not None else {}


class GpuSupply(Protocol):
    def schedulable(self, base: str, gpus: int = 1) -> GpuTarget:
        """Nodes with at least ``gpus`` GPUs; ``base`` names the product where one is made."""
        ...


class Pools:
    """Simulated node pools of products unique to one test; :meth:`cleanup` deletes them."""

    def __init__(self, plane: LocalControlPlane, labels: Mapping[str, str]) -> None:
        self.plane = plane
        self.labels = dict(labels)
        self.suffix = uuid.uuid4().hex[:6]
        self.products: list[str] = []

    def product(self, base: str) -> str:
        return f"{base}-{self.suffix}"

    def add(self, base: str, nodes: int, gpus: int) -> list[str]:
        """``nodes`` more nodes of ``base``'s product, each with ``gpus`` GPUs; their names."""
        product = self.product(base)
        self.products.append(product)
        return self.plane.add_node_pool(NodePool(product, nodes, gpus), labels=self.labels)

    def nodes(self, base: str) -> list[PoolNode]:
        return self.plane.pool_nodes(self.product(base))

    def delete(self, name: str) -> None:
        self.plane.delete_node(name)

    def schedulable(self, base: str, gpus: int = 1) -> GpuTarget:
        return GpuTarget(self.product(base), frozenset(self.add(base, 1, gpus)))

    def cleanup(self) -> None:
        for product in self.products:
            for node in self.plane.pool_nodes(product):
                self.delete(node.name)


class ExistingGpuNodes:
    """The GPU nodes an existing cluster already has; never adds or deletes one."""

    def __init__(
        self,
        admin: client.ApiClient,
        cluster: str,
        workload: Mapping[str, Any] | None,
        resources: Mapping[str, Any] | None = None,
    ) -> None:
        self.admin = admin
        self.cluster = cluster
        self.workload = workload
        self.resources = resources

    def schedulable(self, base: str, gpus: int = 1) -> GpuTarget:
        del base  # the cluster's own product is used, whatever the scenario would have made
        listed = client.CoreV1Api(self.admin).list_node()
        nodes = self.admin.sanitize_for_serialization(listed)["items"]  # type: ignore[no-untyped-call]
        usable = {
            summary.name: node
            for node in nodes
            if (summary := pool_node(node, product_label=DEFAULT_PRODUCT_LABEL)).product
            and summary.gpus >= gpus
            and summary.ready
            and summary.schedulable
        }
        if not usable:
            pytest.skip(
                f"needs a schedulable node labelled {DEFAULT_PRODUCT_LABEL} with allocatable "
                f"{GPU_RESOURCE} >= {gpus}; this cluster ({self.cluster}) has none"
            )
        products = sorted(
            {node["metadata"]["labels"][DEFAULT_PRODUCT_LABEL] for node in usable.values()}
        )
        product = products[0]
        if self.workload is None:
            pytest.skip(
                f"this cluster ({self.cluster}) has a schedulable {product} node, but the suite's "
                f"placeholder runtime image cannot run on a real kubelet: set {GPU_WORKLOAD_ENV} "
                "to a portable workload (JSON) whose image serves its readinessPath on ${PORT}"
            )
        chosen = {
            name: node
            for name, node in usable.items()
            if node["metadata"]["labels"][DEFAULT_PRODUCT_LABEL] == product
        }
        return GpuTarget(
            product=product,
            nodes=frozenset(chosen),
            tolerations=_tolerations(chosen.values()),
            workload=self.workload,
            resources=self.resources,
        )


def _tolerations(nodes: Iterable[Mapping[str, Any]]) -> tuple[Mapping[str, str], ...]:
    """Tolerate exactly the taints the chosen nodes carry (a GPU pool's NoSchedule taint)."""
    taints = sorted(
        {
            (str(taint["key"]), str(taint.get("value") or ""), str(taint["effect"]))
            for node in nodes
            for taint in (node.get("spec") or {}).get("taints") or []
            if not str(taint.get("key", "")).startswith(LIFECYCLE_TAINTS)
        }
    )
    return tuple(
        {"key": key, "operator": "Equal", "value": value, "effect": effect}
        if value
        else {"key": key, "operator": "Exists", "effect": effect}
        for key, value, effect in taints
    )
