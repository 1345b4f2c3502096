"""Simulated GPU node pools: parsing ``PRODUCT=NODESxGPUS`` and building their Node objects.

Tests and demos need Pods that really schedule onto GPU nodes of a given product, without
GPUs or kubelets.  A pool is rendered as plain Node objects that kwok (see :mod:`.kwok`)
then keeps Ready.  Everything here is pure: no I/O, no cluster; :mod:`.nodes` does the
talking.  The Nodes look like those of a GKE/GPU-operator cluster where it matters to the
scheduler: the product label, the ``nvidia.com/gpu`` extended resource, and the
``nvidia.com/gpu=present:NoSchedule`` taint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from infercrane_pulumi.config.validators import DNS_SUBDOMAIN, LABEL_VALUE

DEFAULT_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_RESOURCE = "nvidia.com/gpu"
# Only Nodes carrying this label are handed to kwok, so a Node created by anyone else
# (none exist today) would never be faked, and deleting pool nodes never touches others.
SIMULATED_LABEL = "infercrane.dev/simulated-node"
SIMULATED_VALUE = "kwok"
NODE_NAME_PREFIX = "gpu-"
# What GKE puts on GPU nodes; the apiserver's ExtendedResourceToleration admission adds the
# matching toleration to every Pod requesting nvidia.com/gpu.  Simulated and real nodes share it.
GPU_TAINT: Mapping[str, str] = {"key": GPU_RESOURCE, "value": "present", "effect": "NoSchedule"}

# Per-node capacity besides the GPUs: roughly a cloud GPU VM, large enough that only the
# GPU count ever limits scheduling in tests.
NODE_CPU = "32"
NODE_MEMORY = "256Gi"
NODE_PODS = "110"

# Sanity limits: beyond them a pool is almost certainly a typo (and a 2-core machine would
# spend minutes creating it).
MAX_NODES_PER_POOL = 1000
MAX_GPUS_PER_NODE = 64

_SPEC = re.compile(r"^(?P<product>.*)=(?P<nodes>[0-9]+)x(?P<gpus>[0-9]+)$")
SPEC_SYNTAX = "PRODUCT=NODESxGPUS, e.g. NVIDIA-L40S=2x1"


class NodePoolError(ValueError):
    """A node pool specification or label name is invalid (one line, names the input)."""


@dataclass(frozen=True)
class NodePool:
    """``nodes`` simulated Nodes, each with ``gpus_per_node`` GPUs of ``product``."""

    product: str
    nodes: int
    gpus_per_node: int

    def __post_init__(self) -> None:
        problem = label_value_problem(self.product)
        if problem is not None:
            raise NodePoolError(f"GPU product {self.product!r} {problem}")
        for what, value, limit in (
            ("node count", self.nodes, MAX_NODES_PER_POOL),
            ("GPUs per node", self.gpus_per_node, MAX_GPUS_PER_NODE),
        ):
            if not 1 <= value <= limit:
                raise NodePoolError(f"{what} of {self.product} must be 1..{limit}, got {value}")

    @property
    def spec(self) -> str:
        """The ``PRODUCT=NODESxGPUS`` text this pool parses from."""
        return f"{self.product}={self.nodes}x{self.gpus_per_node}"


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a usable (non-empty) Kubernetes label value, or None."""
    if not value:
        return "is empty"
    if len(value) > 63:
        return f"is {len(value)} characters long; a label value has at most 63"
    if not LABEL_VALUE.fullmatch(value):
        return (
            "is not a valid Kubernetes label value (letters, digits, '-', '_', '.'; "
            "starting and ending with a letter or digit)"
        )
    return None


def validate_label_name(name: str) -> str:
    """Return ``name`` if it is a valid label key (``[prefix/]name``), else raise."""
    prefix, _, short = name.rpartition("/")
    if "/" in prefix:
        raise NodePoolError(f"label name {name!r} has more than one '/'")
    if not short or len(short) > 63 or not LABEL_VALUE.fullmatch(short):
        raise NodePoolError(f"label name {name!r} is not a valid Kubernetes label name")
    if "/" in name and (not prefix or len(prefix) > 253 or not DNS_SUBDOMAIN.fullmatch(prefix)):
        raise NodePoolError(f"label name {name!r} has an invalid prefix (a DNS subdomain)")
    return name


def parse_node_pool(spec: str) -> NodePool:
    """Parse ``PRODUCT=NODESxGPUS`` (``NVIDIA-L40S=2x1``); raise :class:`NodePoolError`."""
    match = _SPEC.match(spec)
    if match is None:
        raise NodePoolError(f"node pool {spec!r}: expected {SPEC_SYNTAX}")
    try:
        return NodePool(match["product"], int(match["nodes"]), int(match["gpus"]))
    except NodePoolError as error:
        raise NodePoolError(f"node pool {spec!r}: {error}") from None


def parse_node_pools(specs: Iterable[str]) -> tuple[NodePool, ...]:
    """Several specs; the same product twice is refused (which count would be meant?)."""
    pools = tuple(parse_node_pool(spec) for spec in specs)
    seen: dict[str, NodePool] = {}
    for pool in pools:
        if pool.product in seen:
            raise NodePoolError(
                f"node pool {pool.spec!r}: product {pool.product} is already given "
                f"as {seen[pool.product].spec!r}"
            )
        seen[pool.product] = pool
    return pools


def product_slug(product: str) -> str:
    """The product as a DNS label: lowercase, every run of '_' '.' '-' becomes one '-'."""
    return re.sub(r"[-_.]+", "-", product.lower())


def node_name(product: str, index: int) -> str:
    """``gpu-<slug>-<index>``; a label value is ≤ 63 chars, so this stays a valid name."""
    return f"{NODE_NAME_PREFIX}{product_slug(product)}-{index}"


def node_index(product: str, name: str) -> int | None:
    """The index in ``name`` if it is one of ``product``'s node names, else None."""
    stem = f"{NODE_NAME_PREFIX}{product_slug(product)}-"
    tail = name.removeprefix(stem)
    if tail == name or not tail.isdigit() or node_name(product, int(tail)) != name:
        return None
    return int(tail)


def node_manifest(
    pool: NodePool,
    index: int,
    *,
    product_label: str = DEFAULT_PRODUCT_LABEL,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Node ``index`` of ``pool``; its status (capacity) is kept by the apiserver on create.

    ``labels`` are added to the node's own (a test run marks what it created with them).
    """
    name = node_name(pool.product, index)
    resources = {
        "cpu": NODE_CPU,
        "memory": NODE_MEMORY,
        "pods": NODE_PODS,
        GPU_RESOURCE: str(pool.gpus_per_node),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                **(labels or {}),
                product_label: pool.product,
                SIMULATED_LABEL: SIMULATED_VALUE,
            },
        },
        "spec": {"taints": [dict(GPU_TAINT)]},
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def pool_manifests(
    pool: NodePool,
    existing_names: Iterable[str],
    *,
    product_label: str = DEFAULT_PRODUCT_LABEL,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Nodes for ``pool`` numbered after the existing ones (adding to a pool grows it).

    Pass the names of *all* simulated Nodes: two products may share a slug (``A_B``, ``A-B``)
    and then share one numbering, so their names never collide.
    """
    taken = [node_index(pool.product, name) for name in existing_names]
    start = max((i for i in taken if i is not None), default=-1) + 1
    return [
        node_manifest(pool, index, product_label=product_label, labels=labels)
        for index in range(start, start + pool.nodes)
    ]


@dataclass(frozen=True)
class PoolNode:
    """What a caller needs to know about one simulated Node."""

    name: str
    product: str
    gpus: int
    ready: bool
    schedulable: bool


def pool_node(node: Mapping[str, Any], *, product_label: str = DEFAULT_PRODUCT_LABEL) -> PoolNode:
    """Summarise a Node given as a dict (the API's JSON form)."""
    metadata = node.get("metadata") or {}
    status = node.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    taints = (node.get("spec") or {}).get("taints") or []
    # The node lifecycle controller taints a node it does not (yet) consider Ready; the
    # scheduler honours those taints, so a node is usable only once they are gone.
    blocked = any(str(t.get("key", "")).startswith("node.kubernetes.io/") for t in taints)
    return PoolNode(
        name=str(metadata.get("name", "")),
        product=str((metadata.get("labels") or {}).get(product_label, "")),
        gpus=int((status.get("allocatable") or {}).get(GPU_RESOURCE, "0")),
        ready=conditions.get("Ready") == "True",
        schedulable=not blocked and not (node.get("spec") or {}).get("unschedulable", False),
    )
