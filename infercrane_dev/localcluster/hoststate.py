"""What a real node changes on the host outside its workdir, captured before and put back after.

The kubelet, containerd, runc and the CNI plugins write to fixed places no flag moves: kernel
tunables (the kubelet sets ``vm.overcommit_memory``, ``kernel.panic``…, the bridge plugin
``net.ipv4.ip_forward``), the ``kubepods`` cgroups, iptables tables (iptables-nft creates a
table on first use, and no iptables command deletes one), and a few directories
(``/var/lib/kubelet/device-plugins``, ``/var/log/containers``, ``/run/containerd/s``…).  A
:class:`HostBaseline` records, before the first change, what those looked like; :func:`restore`
puts them back after the node's processes are gone: mounts under the workdir unmounted,
leftover container processes killed, ``kubepods`` cgroups removed, tables and directories
that did not exist deleted, changed tunables rewritten.

Only one real node runs per machine (:mod:`.hostlock`), so whatever a baseline did not hold
in these places is the node's.  This module must never be used without holding that lock.
A Kind cluster (:mod:`infercrane_dev.kind`) holds the same lock and records its own list of
fixed paths (Docker's) and cgroup names in a baseline of the same kind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_PROC_SYS = Path("/proc/sys")
# Tunables the node's components are known to set live under these; the whole subtrees are
# recorded so that an unexpected change is put back too.
# fs: systemd as PID 1 of a privileged container raises fs.file-max on the host (Kind's nodes).
SYSCTL_ROOTS = (
    "vm",
    "kernel",
    "fs",
    "net/ipv4",
    "net/ipv6",
    "net/bridge",
    "net/netfilter",
    "net/core",
)
# Writable, but changed by the kernel itself all the time.
_VOLATILE_SYSCTLS = frozenset({"kernel/ns_last_pid"})
_VOLATILE_SYSCTL_DIRS = ("kernel/random/",)
# Directories outside the workdir that the kubelet, containerd, runc or a device plugin create
# (fixed paths).  Any of them absent before is removed after.
HOST_PATHS = (
    "/var/lib/kubelet",
    "/var/log/containers",
    "/var/log/pods",
    "/var/run/netns",
    "/run/netns",
    "/run/containerd",
    "/var/lib/cni",
    "/etc/cni",
    "/opt/cni",
    "/opt/containerd",
    "/usr/libexec/kubernetes",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The kubelet puts every Pod under this cgroup (cgroupsPerQOS, cgroup root "/").
KUBEPODS = "kubepods"
NFT_FAMILIES = ("ip", "ip6")
_LIBC = ctypes.CDLL(None, use_errno=True)
_MNT_DETACH = 2


def _sysctl_name(path: Path) -> str:
    return str(path.relative_to(_PROC_SYS))


def read_sysctls(roots: Iterable[str] = SYSCTL_ROOTS) -> dict[str, str]:
    """Every readable and writable tunable under ``roots`` (``net/ipv4/ip_forward``: value)."""
    values: dict[str, str] = {}
    for root in roots:
        base = _PROC_SYS / root
        if not base.is_dir():
            continue
        for dirpath, _, filenames in os.walk(base):
            for filename in filenames:
                path = Path(dirpath) / filename
                name = _sysctl_name(path)
                if name in _VOLATILE_SYSCTLS or name.startswith(_VOLATILE_SYSCTL_DIRS):
                    continue
                try:
                    if not path.stat().st_mode & 0o200:
                        continue
                    values[name] = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    continue  # write-only entries (flush, drop triggers) and permission limits
    return values


def changed_sysctls(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """The tunables of ``before`` whose value differs now: name -> value to write back.

    Per-interface entries of interfaces that no longer exist are not changes.
    """
    return {name: value for name, value in before.items() if name in after and after[name] != value}


def nft_tables() -> list[str]:
    """The iptables-nft tables (``ip nat``, ``ip6 filter``…) that exist now."""
    try:
        listed = subprocess.run(
            ["nft", "list", "tables"], capture_output=True, text=True, check=False
        )
    except OSError:
        return []
    tables = []
    for line in listed.stdout.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "table" and words[1] in NFT_FAMILIES:
            tables.append(f"{words[1]} {words[2]}")
    return tables


@dataclass
class HostBaseline:
    """The host before a real node started (recorded in the cluster's state for ``down``).

    ``watched_paths`` are the fixed paths whose absence is recorded (any of them absent before
    is removed after), ``cgroups`` the cgroup names whose directories under every hierarchy are
    removed after (they hold nothing once the node's processes are gone).
    """

    sysctls: dict[str, str] = field(default_factory=dict)
    nft_tables: list[str] = field(default_factory=list)
    existing_paths: list[str] = field(default_factory=list)
    watched_paths: list[str] = field(default_factory=lambda: list(HOST_PATHS))
    cgroups: list[str] = field(default_factory=lambda: [KUBEPODS])

    @classmethod
    def capture(
        cls, paths: Iterable[str] = HOST_PATHS, cgroups: Iterable[str] = (KUBEPODS,)
    ) -> HostBaseline:
        watched = list(paths)
        return cls(
            sysctls=read_sysctls(),
            nft_tables=nft_tables(),
            existing_paths=[p for p in watched if os.path.lexists(p)],
            watched_paths=watched,
            cgroups=list(cgroups),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "sysctls": self.sysctls,
            "nft_tables": self.nft_tables,
            "existing_paths": self.existing_paths,
            "watched_paths": self.watched_paths,
            "cgroups": self.cgroups,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostBaseline:
        # A record written before the lists were recorded watched the real node's.
        return cls(
            sysctls={str(k): str(v) for k, v in dict(data["sysctls"]).items()},
            nft_tables=[str(t) for t in data["nft_tables"]],
            existing_paths=[str(p) for p in data["existing_paths"]],
            watched_paths=[str(p) for p in data.get("watched_paths", HOST_PATHS)],
            cgroups=[str(c) for c in data.get("cgroups", [KUBEPODS])],
        )


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, deepest first (so each can be unmounted in turn)."""
    prefix = str(root).rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(root) or point.startswith(prefix):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def _umount(point: str, flags: int) -> bool:
    # The system call, not umount(8): util-linux would create /run/mount/utab on the host.
    return bool(_LIBC.umount2(point.encode(), flags) == 0)


def unmount_under(root: Path) -> list[str]:
    """Unmount everything below ``root`` (rootfs overlays, netns, volumes); return errors."""
    for _ in range(3):  # a bind mount may be stacked several times on one point
        points = mounts_under(root)
        if not points:
            return []
        for point in points:
            # Busy only while a process still uses it; detach then, so the tree can go.
            if not _umount(point, 0):
                _umount(point, _MNT_DETACH)
    return [f"still mounted: {point}" for point in mounts_under(root)]


def cgroup_dirs(name: str = KUBEPODS) -> list[Path]:
    """The ``kubepods`` (or ``name``) cgroup directories of every hierarchy, deepest first."""
    found: list[Path] = []
    if not CGROUP_ROOT.is_dir():
        return found
    hierarchies = [CGROUP_ROOT, *(p for p in CGROUP_ROOT.iterdir() if p.is_dir())]
    for hierarchy in hierarchies:
        top = hierarchy / name
        if top.is_dir():
            found += [Path(dirpath) for dirpath, _, _ in os.walk(top)]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def kubepods_pids() -> set[int]:
    pids: set[int] = set()
    for directory in cgroup_dirs():
        with contextlib.suppress(OSError):
            text = (directory / "cgroup.procs").read_text(encoding="utf-8")
            pids |= {int(pid) for pid in text.split()}
    return pids


def kill_pod_processes(timeout: float = 10.0) -> list[str]:
    """SIGKILL every process left in the Pods' cgroups (containers whose shim is gone)."""
    deadline = time.monotonic() + timeout
    while pids := kubepods_pids():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() >= deadline:
            return [f"container processes survived SIGKILL: {sorted(pids)}"]
        time.sleep(0.05)
    return []


def remove_cgroups(name: str = KUBEPODS) -> list[str]:
    errors = []
    for directory in cgroup_dirs(name):
        try:
            directory.rmdir()
        except FileNotFoundError:
            continue
        except OSError as error:
            errors.append(f"cgroup {directory}: {error.strerror}")
    return errors


def restore(baseline: HostBaseline) -> list[str]:
    """Put back what ``baseline`` recorded; every step is tried, errors are returned."""
    errors = kill_pod_processes()
    for name in baseline.cgroups:
        errors += remove_cgroups(name)
    for table in nft_tables():
        if table not in baseline.nft_tables:
            done = subprocess.run(
                ["nft", "delete", "table", *table.split()],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                errors.append(f"nft delete table {table}: {done.stderr.strip()}")
    for path in baseline.watched_paths:
        if path not in baseline.existing_paths and os.path.lexists(path):
            unmount_under(Path(path))
            shutil.rmtree(path, ignore_errors=True)
            if os.path.lexists(path):
                errors.append(f"could not remove {path}")
    # ip_forward first: writing it resets every interface's forwarding flag.
    changed = changed_sysctls(baseline.sysctls, read_sysctls())
    for name in sorted(changed, key=lambda n: n != "net/ipv4/ip_forward"):
        try:
            (_PROC_SYS / name).write_text(baseline.sysctls[name], encoding="utf-8")
        except OSError as error:
            errors.append(f"sysctl {name.replace('/', '.')}: {error.strerror}")
    return errors
