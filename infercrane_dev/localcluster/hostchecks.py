"""Whether this machine can run a real node now, decided before anything starts.

:func:`unavailable` names the first thing missing in one line (root, cgroups, a binary or a
host command, the machine lock, a fixed port, the bridge and routes, the socket path length),
so that ``up`` and :meth:`.controlplane.LocalControlPlane.start` refuse without starting
anything.  The checks start nothing, and leave the host as they found it.  The lock, ports and
bridge of a node whose run was killed refuse nothing: the next start puts them back first
(:mod:`.noderecord`).
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path

from infercrane_dev.toolchain import SYSTEM_PATH, BinaryNotFoundError, find_binary

from . import hostlock, hostnet, noderecord
from .kubelet import KUBELET_HEALTHZ_PORT, KUBELET_PORT
from .kubeproxy import HEALTHZ_PORT, METRICS_PORT
from .layout import NodeLayout

NODE_BINARIES = (
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    *hostnet.CNI_PLUGINS,
    "infercrane-gpu-device-plugin",
)
# From the host's packages (hack/host-packages.sh installs them).
HOST_COMMANDS = ("runc", "iptables", "ip6tables", "iptables-save", "iptables-restore", "nft", "ip")
FIXED_PORTS = (KUBELET_HEALTHZ_PORT, METRICS_PORT, KUBELET_PORT, HEALTHZ_PORT)
# A unix socket path holds at most 107 bytes.
_MAX_SOCKET_PATH = 107


class RealNodeUnavailable(RuntimeError):
    """This machine cannot run a real node now (one line saying why); nothing was started."""


def _cgroups_problem() -> str | None:
    mounts = Path("/proc/self/mounts").read_text(encoding="utf-8").split("\n")
    kinds = {line.split()[2] for line in mounts if len(line.split()) > 2}
    if not kinds & {"cgroup", "cgroup2"}:
        return "the real node needs cgroups, and no cgroup filesystem is mounted"
    return None


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _missing_binary() -> str | None:
    for name in NODE_BINARIES:
        try:
            find_binary(name)
        except BinaryNotFoundError:
            return (
                f"the real node needs {name!r}, which is not in the tools bin dir; run `make tools`"
            )
    for command in HOST_COMMANDS:
        if shutil.which(command, path=SYSTEM_PATH) is None:
            return f"the real node needs {command!r} on the host; run hack/host-packages.sh as root"
    return None


def _ports_problem() -> str | None:
    taken = [str(port) for port in FIXED_PORTS if _port_taken(port)]
    if taken:
        return f"ports {', '.join(taken)} are in use (another kubelet or kube-proxy runs here)"
    return None


def _network_problem() -> str | None:
    if hostnet.bridge_exists():
        return f"network interface {hostnet.BRIDGE} already exists (left by a real node?)"
    conflicts = hostnet.route_conflicts()
    if conflicts:
        return f"the host already routes the real node's networks: {conflicts[0]}"
    return None


def _root_problem() -> str | None:
    if os.geteuid() != 0:
        return "the real node needs root (it runs containers and programs iptables)"
    return None


# Cheapest first.
_MACHINE_CHECKS: tuple[Callable[[], str | None], ...] = (
    _root_problem,
    _cgroups_problem,
    _missing_binary,
)
# What another real node holds; the lock before the ports, whose holder it names.
_HOST_CHECKS: tuple[Callable[[], str | None], ...] = (
    hostlock.is_locked,
    _ports_problem,
    _network_problem,
)


def _first_problem(checks: tuple[Callable[[], str | None], ...]) -> str | None:
    return next((problem for check in checks if (problem := check()) is not None), None)


def unavailable(workdir: Path | None = None) -> str | None:
    """Why a real node cannot start on this machine now (one line), or None.

    Checks root, cgroups, the binaries and host commands, the machine lock, the fixed ports,
    the bridge and routes, and (given the node's ``workdir``) the socket path length.
    """
    problem = _first_problem(_MACHINE_CHECKS)
    # A node whose run was killed holds nothing: the next start puts it back first.
    if problem is None and noderecord.abandoned() is None:
        problem = _first_problem(_HOST_CHECKS)
    if problem is not None:
        return problem
    # containerd also listens on the address + ".ttrpc".
    longest = f"{NodeLayout(workdir).containerd.address}.ttrpc" if workdir else ""
    if len(longest) > _MAX_SOCKET_PATH:
        return f"workdir {workdir} is too long for containerd's socket path"
    return None
