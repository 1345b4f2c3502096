"""Whether this machine can run a Kind cluster of ours now, decided before anything starts.

:func:`unavailable` names the first thing missing in one line: root, Debian's Docker,
debootstrap and runc (``hack/host-packages.sh``), a binary of the tools bin dir (``hack/tools``:
``--only kind,coredns`` beside the base families), and to start a cluster also cgroups, the
machine's real-node lock (Kind and the
local control plane's real node share ``/run/containerd`` and host tunables, so they never run
at once), and a host route already covering the Service range (``up`` routes it to a node so
that this host reaches ClusterIPs); with KServe, its controller and upstream's files
(``--only kserve``). It starts nothing and changes nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from infercrane_dev.localcluster import hostlock
from infercrane_dev.localcluster.kserve import KServeFiles
from infercrane_dev.toolchain import SYSTEM_PATH, BinaryNotFoundError, find_binary

from . import kserve
from .clusterconfig import SERVICE_SUBNET
from .docker import DOCKER, DOCKERD
from .nodeimage import BINARIES, KIND_FILES

RUNC = Path("/usr/sbin/runc")
# What the cluster's tools, node image and images are made of (the Kubernetes images' binaries
# besides those the node carries).
TOOLS = (
    "kind",
    "infercrane-runc-capfilter",
    "infercrane-pause",
    "infercrane-standin",
    "infercrane-gpu-device-plugin",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "etcd",
    "coredns",
    *(binary for binaries in BINARIES.values() for binary in binaries),
)
HOST_PROGRAMS = ("ip", "unshare", "apt-get", "dpkg-query")


def _root() -> str | None:
    if os.geteuid() != 0:
        return "Kind here needs root (it runs dockerd and privileged node containers)"
    return None


def _cgroups() -> str | None:
    mounts = Path("/proc/self/mounts").read_text(encoding="utf-8")
    if " cgroup" not in mounts:
        return "Kind needs cgroups, and no cgroup filesystem is mounted"
    return None


def _host_packages() -> str | None:
    for path, package in ((DOCKERD, "docker.io"), (DOCKER, "docker.io"), (RUNC, "runc")):
        if not os.access(path, os.X_OK):
            return f"Kind needs {path} (Debian's {package}); run hack/host-packages.sh as root"
    if shutil.which("debootstrap", path=SYSTEM_PATH) is None:
        return "Kind's node image needs debootstrap; run hack/host-packages.sh as root"
    for program in HOST_PROGRAMS:
        if shutil.which(program, path=SYSTEM_PATH) is None:
            return f"Kind needs {program!r} on the host"
    return None


def _tools() -> str | None:
    hint = "run `make base-tools` and `hack/tools/build.sh --only kind,coredns`"
    for name in TOOLS:
        try:
            found = find_binary(name)
        except BinaryNotFoundError:
            return f"Kind needs {name!r} from the tools bin dir; {hint}"
        if not (found.parent / KIND_FILES).is_dir():
            return f"Kind needs kind's node files ({found.parent / KIND_FILES}); {hint}"
    return None


def _kserve_tools() -> str | None:
    hint = "run `hack/tools/build.sh --only kserve`"
    try:
        files = KServeFiles.beside(find_binary(kserve.MANAGER))
    except BinaryNotFoundError:
        return f"KServe in Kind needs {kserve.MANAGER!r} from the tools bin dir; {hint}"
    missing = [f for f in kserve.INSTALL_FILES if not files.install(f).is_file()]
    if missing:
        return f"KServe in Kind needs upstream's {missing[0]} in {files.install('')}; {hint}"
    return None


def _service_route() -> str | None:
    shown = subprocess.run(
        ["ip", "-4", "route", "show", "root", SERVICE_SUBNET],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if shown:
        return (
            f"the host already routes the Service range {SERVICE_SUBNET}: {shown.splitlines()[0]}"
        )
    return None


# What making the node image's inputs needs (debootstrap runs as root), cheapest first.
PREPARE_CHECKS: tuple[Callable[[], str | None], ...] = (_root, _host_packages, _tools)
# ... and starting a cluster; the lock before the route, which a running real node would explain.
START_CHECKS = (*PREPARE_CHECKS, _cgroups, hostlock.is_locked, _service_route)


def unavailable(*, starting: bool = True, kserve: bool = False) -> str | None:
    """Why a Kind cluster (``kserve``: with KServe) cannot start here now, or
    (``starting=False``) why its images cannot be prepared here (one line), or None."""
    checks = (
        *(START_CHECKS if starting else PREPARE_CHECKS),
        *((_kserve_tools,) if kserve else ()),
    )
    return next((problem for check in checks if (problem := check()) is not None), None)
