"""The real node's specification and the Node facts derived from it (pure, no I/O).

A real node is this machine running a kubelet, so unlike a simulated pool there is exactly one
of it: ``PRODUCT=1xGPUS`` (``NVIDIA-L4=1x2``) keeps the pool syntax so that both read alike,
and refuses any node count but 1.  Its GPUs are advertised by a device plugin, so the scheduler
and the kubelet's admission count them as on a real GPU node.  The Node carries the same product
label and GPU taint as the simulated ones (:mod:`.nodepools`), and never the simulated-node
label: kwok must never manage it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from infercrane_pulumi.config.validators import DNS_SUBDOMAIN

from .nodepools import GPU_TAINT, NodePoolError, parse_node_pool

REAL_NODE_SYNTAX = "PRODUCT=1xGPUS, e.g. NVIDIA-L4=1x2"
# The Node name is the machine's hostname, which is what the kubelet registers by default; it
# must be a DNS subdomain (lowercase) to be a Node name.


class RealNodeSpecError(ValueError):
    """A real-node specification is invalid (one line, names the input)."""


@dataclass(frozen=True)
class RealNodeSpec:
    """One real node with ``gpus`` GPUs of ``product``; it runs the stand-in images of
    :mod:`infercrane_dev.images`, which it builds and imports when it starts."""

    product: str
    gpus: int

    def __post_init__(self) -> None:
        try:
            parse_node_pool(f"{self.product}=1x{self.gpus}")
        except NodePoolError as error:
            raise RealNodeSpecError(f"real node: {error}") from None

    @property
    def spec(self) -> str:
        return f"{self.product}=1x{self.gpus}"


def parse_real_node(spec: str) -> RealNodeSpec:
    """Parse ``PRODUCT=1xGPUS``; raise :class:`RealNodeSpecError` naming the input."""
    try:
        pool = parse_node_pool(spec)
    except NodePoolError as error:
        raise RealNodeSpecError(
            f"real node {spec!r}: expected {REAL_NODE_SYNTAX} ({error})"
        ) from None
    if pool.nodes != 1:
        raise RealNodeSpecError(
            f"real node {spec!r}: this machine is one node, so the count must be 1 "
            f"({REAL_NODE_SYNTAX})"
        )
    return RealNodeSpec(pool.product, pool.gpus_per_node)


def node_name(hostname: str) -> str:
    """The Node name for ``hostname``, as the kubelet derives it (lowercased)."""
    name = hostname.strip().lower()
    if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
        raise RealNodeSpecError(
            f"hostname {hostname!r} is not a valid Node name (a lowercase DNS subdomain)"
        )
    return name


def node_labels(spec: RealNodeSpec, *, product_label: str) -> dict[str, str]:
    """Labels the kubelet registers the Node with (the kubelet adds hostname, os and arch)."""
    return {product_label: spec.product}


def node_taints() -> list[dict[str, str]]:
    """Taints the kubelet registers the Node with: the GPU taint of the simulated nodes."""
    return [dict(GPU_TAINT)]


def gpu_capacity(node: Mapping[str, object], resource: str) -> int:
    """The allocatable count of ``resource`` in a Node given as the API's JSON form."""
    status = node.get("status")
    allocatable = status.get("allocatable") if isinstance(status, Mapping) else None
    value = allocatable.get(resource, "0") if isinstance(allocatable, Mapping) else "0"
    return int(str(value))
