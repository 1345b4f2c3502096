"""The Pod network of a Kind cluster without kindnetd (pure, no I/O).

kindnetd, kind's CNI, is not served by the Go module proxy, so its two jobs are done once, by
``up``, when every node has its Pod range (``spec.podCIDR``, given by the controller manager):
each node gets a CNI configuration for the bridge plugin with host-local addresses from its
range and a default route through the bridge, and a route to every other node's range through
that node's address on Docker's network. The routes are a systemd unit of the node's
(:func:`routes_unit`), started at once and at every start of the node container: a node's
network namespace is new each time it starts (``docker stop``/``start``), and its routes go with
the old one. A Kind cluster here never gains a node after ``up``, and a restarted node keeps its
address on Docker's network (``test_kind`` checks it), so nothing needs to watch nodes as
kindnetd does.

No masquerade: Pods only talk to Pods, nodes and the API server (all on the nodes' network), and
nothing leaves the machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CNI_VERSION = "1.0.0"
CONFLIST_PATH = "/etc/cni/net.d/10-infercrane-bridge.conflist"
ROUTES_UNIT = "infercrane-routes.service"
ROUTES_UNIT_PATH = f"/etc/systemd/system/{ROUTES_UNIT}"
BRIDGE = "cni0"


@dataclass(frozen=True)
class NodeAddress:
    name: str
    ip: str  # on Docker's network
    pod_cidr: str


@dataclass(frozen=True)
class NodeNetwork:
    conflist: dict[str, Any]
    routes: tuple[tuple[str, str], ...]  # (another node's Pod range, that node's address)


def conflist(pod_cidr: str) -> dict[str, Any]:
    return {
        "cniVersion": CNI_VERSION,
        "name": "infercrane-bridge",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                # A Pod reaches itself through its own Service.
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            }
        ],
    }


def node_networks(nodes: list[NodeAddress]) -> dict[str, NodeNetwork]:
    """Each node's CNI configuration and its routes to the others' Pod ranges."""
    return {
        node.name: NodeNetwork(
            conflist(node.pod_cidr),
            tuple((other.pod_cidr, other.ip) for other in nodes if other.name != node.name),
        )
        for node in nodes
    }


def routes_unit(routes: tuple[tuple[str, str], ...]) -> str:
    """A oneshot unit that puts the node's routes back, before its kubelet starts Pods."""
    commands = "".join(
        f"ExecStart=/usr/sbin/ip route replace {cidr} via {via}\n" for cidr, via in routes
    )
    return (
        "[Unit]\n"
        "Description=InferCrane: routes to the other nodes' Pod ranges (kindnetd's job)\n"
        "Before=kubelet.service\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        f"{commands}"
        "[Install]\n"
        "WantedBy=multi-user.target\n"
    )
