"""Locate the pinned toolchain's executables (etcd, kube-apiserver, the Pulumi CLI, kind ...),
for every dev tool alike: the local cluster, Kind, the images, the demo, the state stores.

The binaries are built by ``hack/tools/build.sh`` into a versioned cache; this
module only *finds* them.  It must never build, download or install anything:
a missing binary is reported with an error that says how to provide it.  The few
commands a real node takes from the host instead are looked up on :data:`SYSTEM_PATH`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from infercrane_dev import REPO_ROOT

TOOLS_BIN_ENV = "INFERCRANE_TOOLS_BIN"
"""Environment variable naming a directory that holds the binaries; checked first."""

BUILD_SCRIPT_RELATIVE = Path("hack") / "tools" / "build.sh"

CONTROL_PLANE_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
# Only needed by a control plane started with scheduling (simulated GPU nodes).
SCHEDULING_BINARIES = ("kube-scheduler", "kwok")

# Where the real node finds the host's commands (runc, iptables ...), after the tools bin dir.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Where build.sh caches its output; only consulted while the script itself is absent.
_CACHE_GLOB_ROOT = Path.home() / ".cache" / "infercrane" / "tools"


class BinaryNotFoundError(FileNotFoundError):
    """A control-plane executable could not be located."""


def repo_root() -> Path:
    """The checkout this package lives in (three levels above this file)."""
    return REPO_ROOT


def _build_script_bin_dir(script: Path) -> Path | None:
    # `--bin-dir` only prints where the script puts (or would put) binaries; it
    # must not build, so a short timeout keeps a misbehaving script from hanging us.
    try:
        completed = subprocess.run(
            ["bash", str(script), "--bin-dir"],
            check=True,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in completed.stdout.splitlines() if line.strip()]
    return Path(lines[-1]) if lines else None


def candidate_dirs(root: Path | None = None) -> list[Path]:
    """Directories searched, in priority order (for error messages and tests)."""
    env_dir = os.environ.get(TOOLS_BIN_ENV)
    if env_dir:
        # An explicit override is authoritative: silently falling back to some
        # other cache would hide a typo in the variable.
        return [Path(env_dir)]
    script = (root or repo_root()) / BUILD_SCRIPT_RELATIVE
    if script.is_file():
        found = _build_script_bin_dir(script)
        return [found] if found is not None else []
    # Cache entries are named by content hash, so the most recently built one is
    # the best guess at what the current checkout would build.
    return sorted(_CACHE_GLOB_ROOT.glob("*/bin"), key=_mtime, reverse=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def find_binary(name: str, *, root: Path | None = None) -> Path:
    """Return the path of executable ``name`` or raise :class:`BinaryNotFoundError`."""
    searched = candidate_dirs(root)
    for directory in searched:
        path = directory / name
        if path.is_file() and os.access(path, os.X_OK):
            return path
    where = ", ".join(str(d) for d in searched) or "nowhere (no candidate directory exists)"
    raise BinaryNotFoundError(
        f"control-plane binary {name!r} not found (searched: {where}). "
        f"Set {TOOLS_BIN_ENV} to a directory containing "
        f"{', '.join(CONTROL_PLANE_BINARIES + SCHEDULING_BINARIES)}, "
        f"or build them with `{BUILD_SCRIPT_RELATIVE}` "
        f"(its `--bin-dir` output is searched when {TOOLS_BIN_ENV} is unset)."
    )
