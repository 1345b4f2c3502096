"""The real node's network on the host: one bridge, its CNI configuration, and its cleanup.

Pods sit on the bridge ``infercrane0`` with addresses from ``POD_SUBNET``, a /24 at the top of
kwok's simulated range that kwok never hands out (kwok numbers simulated Pods from the bottom,
and they only ever exist in API objects).  Pods get no default route and no masquerade, so
they cannot reach past the bridge.  The bridge is created here, before the kubelet starts,
because its address is the node's InternalIP (the kubelet refuses an address that is not on a
host interface, and refuses loopback): the API server, the kubelet and kube-proxy then only
ever talk over addresses of this machine.  The Service range is routed into the same bridge,
so a ClusterIP that kube-proxy has not programmed yet dies on the bridge instead of leaving
the machine by the default route.

The decisions (CNI configuration, which iptables rules to delete) are pure functions; the
rest shells out to ``ip`` and ``iptables-save``/``iptables-restore``.  Nothing here touches an
interface, route or chain it did not create, except ``KUBE-*``/``CNI-*`` chains, which only a
kubelet, kube-proxy or CNI plugin creates (one real node per machine: see :mod:`.hostlock`).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .certs import SERVICE_CLUSTER_IP_RANGE
from .kwok import POD_CIDR

BRIDGE = "infercrane0"
POD_SUBNET = "10.244.255.0/24"
# The bridge's address: the Pods' gateway and the node's InternalIP.
NODE_IP = str(next(ipaddress.ip_network(POD_SUBNET).hosts()))
CNI_NETWORK = "infercrane-real-node"
CNI_VERSION = "1.0.0"
CNI_PLUGINS = ("bridge", "host-local", "loopback")
# Chains created by the kubelet (KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY, KUBE-FIREWALL),
# kube-proxy (KUBE-SERVICES, KUBE-SVC-…, KUBE-PROXY-CANARY, …) and CNI plugins (CNI-…).
OWNED_CHAIN_PREFIXES = ("KUBE-", "CNI-")
IPTABLES_FAMILIES = (("iptables-save", "iptables-restore"), ("ip6tables-save", "ip6tables-restore"))


class HostNetworkError(RuntimeError):
    """Setting up or removing the real node's network failed."""


def networks_disjoint() -> bool:
    """The Pod subnet lies in kwok's range, clear of the Service range (unit-tested)."""
    pods = ipaddress.IPv4Network(POD_SUBNET)
    return pods.subnet_of(ipaddress.IPv4Network(POD_CIDR)) and not pods.overlaps(
        ipaddress.IPv4Network(SERVICE_CLUSTER_IP_RANGE)
    )


def cni_conflist(ipam_dir: Path) -> dict[str, Any]:
    """The CNI network: bridge + host-local, no default route, no masquerade."""
    return {
        "cniVersion": CNI_VERSION,
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                # The bridge holds the gateway address (created by ensure_bridge already).
                "isGateway": True,
                # No isDefaultGateway: Pods get only their subnet's route.
                "isDefaultGateway": False,
                "ipMasq": False,
                "hairpinMode": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": NODE_IP}]],
                    # host-local's default is /var/lib/cni/networks on the host.
                    "dataDir": str(ipam_dir),
                },
            }
        ],
    }


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and completed.returncode != 0:
        raise HostNetworkError(f"ip {' '.join(args)}: {completed.stderr.strip()}")
    return completed


def bridge_exists() -> bool:
    return _ip("link", "show", "dev", BRIDGE, check=False).returncode == 0


def route_conflicts() -> list[str]:
    """Routes of the host that already cover the Pod subnet or the Service range."""
    found = []
    for network in (POD_SUBNET, SERVICE_CLUSTER_IP_RANGE):
        shown = _ip("-4", "route", "show", "root", network).stdout.strip()
        found += [f"{network}: {line}" for line in shown.splitlines() if line]
    return found


def ensure_bridge() -> None:
    """Create the bridge with the node address and route the Service range into it."""
    _ip("link", "add", "name", BRIDGE, "type", "bridge")
    _ip("addr", "add", f"{NODE_IP}/{ipaddress.ip_network(POD_SUBNET).prefixlen}", "dev", BRIDGE)
    _ip("link", "set", "dev", BRIDGE, "up")
    _ip("route", "add", SERVICE_CLUSTER_IP_RANGE, "dev", BRIDGE, "src", NODE_IP)


def remove_bridge() -> None:
    """Delete the bridge (its routes go with it); absent is fine."""
    if bridge_exists():
        _ip("link", "delete", "dev", BRIDGE)


def chain_removal(saved: str) -> str:
    """``iptables-restore --noflush`` input deleting every owned chain and every jump to one.

    ``saved`` is ``iptables-save`` output.  Rules in other chains that jump to an owned chain
    are deleted first (a chain still referenced cannot be deleted), then the owned chains are
    flushed, then deleted.  Tables without owned chains are left out.
    """
    out: list[str] = []
    table: str | None = None
    chains: list[str] = []
    jumps: list[str] = []

    def owned(chain: str) -> bool:
        return chain.startswith(OWNED_CHAIN_PREFIXES)

    def close() -> None:
        if table is not None and chains:
            out.append(f"*{table}")
            out.extend(jumps)
            out.extend(f"-F {chain}" for chain in chains)
            out.extend(f"-X {chain}" for chain in chains)
            out.append("COMMIT")

    for line in saved.splitlines():
        if line.startswith("*"):
            table, chains, jumps = line[1:].strip(), [], []
        elif line.startswith(":"):
            name = line[1:].split()[0]
            if owned(name):
                chains.append(name)
        elif line.startswith("-A "):
            words = line.split()
            if not owned(words[1]) and any(owned(w) for w in _targets(words)):
                jumps.append("-D " + line[3:])
        elif line.strip() == "COMMIT":
            close()
            table = None
    return "\n".join(out) + ("\n" if out else "")


def _targets(words: Sequence[str]) -> list[str]:
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-j", "-g", "--jump", "--goto")]


def remove_owned_chains() -> list[str]:
    """Delete owned chains in every table of both families; return errors."""
    errors = []
    for save, restore in IPTABLES_FAMILIES:
        saved = subprocess.run([save], capture_output=True, text=True, check=False)
        if saved.returncode != 0:
            errors.append(f"{save}: {saved.stderr.strip()}")
            continue
        script = chain_removal(saved.stdout)
        if not script:
            continue
        done = subprocess.run(
            [restore, "--noflush"], input=script, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            errors.append(f"{restore}: {done.stderr.strip()}")
    return errors
