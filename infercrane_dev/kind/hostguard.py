"""What a Kind cluster changes on the host, recorded before and put back after.

Kind's nodes are privileged containers running systemd and a kubelet, and the host shares its
kernel with them: systemd as their PID 1 raises ``fs.file-max``, their kubelets set
``kernel.panic``, ``kernel.panic_on_oops`` and ``vm.overcommit_memory``, all host-wide. Docker
creates what no flag moves: ``/lib/modules`` (kind bind-mounts it, and Docker creates a missing
source), ``/run/containerd/s`` (the shims' sockets of its containerd), ``/opt/containerd`` (its
containerd's plugin directory), its ``docker`` cgroups,
and kind's network bridge. And ``up`` routes the Service range to a node. So the baseline is
the real node's (:mod:`infercrane_dev.localcluster.hoststate`: every writable tunable, the
iptables-nft tables, which of these paths existed) with Docker's paths and cgroup name; the
restore stops what Docker left (its containerd shims, mounts under its directories), deletes the
bridge and the route, then puts the baseline back. Like the real node's, it must only ever run
under the machine's real-node lock.
"""

from __future__ import annotations

import subprocess

from infercrane_dev.localcluster import hoststate
from infercrane_dev.localcluster.noderuntime import kill_shims

from .docker import DockerPaths

# Fixed paths Docker or kind may create; any of them absent before is removed after.
HOST_PATHS = (
    "/lib/modules",
    "/run/containerd",
    "/run/docker",
    "/run/docker.sock",
    "/var/lib/docker",
    "/etc/docker",
    # containerd's opt plugin makes it (bin/, lib/) at every start, whatever dockerd is told:
    # a machine where Docker never ran had none before the first Kind cluster (seen in CI).
    "/opt/containerd",
)
# dockerd's cgroup parent (cgroupfs driver) in every hierarchy.
CGROUPS = ("docker",)


def capture() -> hoststate.HostBaseline:
    return hoststate.HostBaseline.capture(paths=HOST_PATHS, cgroups=CGROUPS)


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=False)


def add_service_route(cidr: str, via: str) -> None:
    done = _ip("route", "add", cidr, "via", via)
    if done.returncode != 0:
        raise RuntimeError(f"ip route add {cidr} via {via}: {done.stderr.strip()}")


def remove_service_route(cidr: str, via: str) -> list[str]:
    """Delete the route; gone already (its bridge went first) is fine."""
    if not _ip("route", "show", "root", cidr).stdout.strip():
        return []
    done = _ip("route", "del", cidr, "via", via)
    return [] if done.returncode == 0 else [f"ip route del {cidr}: {done.stderr.strip()}"]


def restore(
    baseline: hoststate.HostBaseline, paths: DockerPaths, *, bridge: str | None
) -> list[str]:
    """Once dockerd is stopped: what it left, kind's bridge, then the recorded host."""
    errors = kill_shims(paths.exec_root / "containerd" / "containerd.sock")
    errors += hoststate.unmount_under(paths.exec_root)
    errors += hoststate.unmount_under(paths.data_root)
    if bridge is not None and _ip("link", "show", "dev", bridge).returncode == 0:
        done = _ip("link", "delete", "dev", bridge)
        if done.returncode != 0:
            errors.append(f"ip link delete {bridge}: {done.stderr.strip()}")
    return errors + hoststate.restore(baseline)
