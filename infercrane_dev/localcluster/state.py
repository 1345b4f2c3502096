"""Persisted record of a detached local control plane (``up`` / ``down``).

``up`` exits while the daemons keep running, so everything ``down`` needs —
pids with their start times, the workdir, the kubeconfig — is written to
``state.json`` in the state directory.  This module reads and writes that
record and tears down what it describes; it must never signal a process that
the record does not identify (see :mod:`.processes`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .nodepools import DEFAULT_PRODUCT_LABEL
from .noderuntime import RealNodeRuntime
from .processes import ManagedProcess, ProcessStopError, stop_process

STATE_FILE = "state.json"
_FORMAT_VERSION = 1


class StateError(RuntimeError):
    """The state directory holds something unreadable."""


@dataclass
class ClusterState:
    workdir: Path
    kubeconfig_path: Path
    server: str
    admin_context: str
    provider_context: str
    cold_start_seconds: float
    # In start order; teardown walks it backwards.
    processes: list[ManagedProcess] = field(default_factory=list)
    # Later node commands (add-pool, nodes) need both; records without them predate them.
    scheduling: bool = False
    gpu_product_label: str = DEFAULT_PRODUCT_LABEL
    # The real node's runtime record (noderuntime.RealNodeRuntime.to_json), torn down first.
    real_node: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _FORMAT_VERSION,
            "workdir": str(self.workdir),
            "kubeconfig_path": str(self.kubeconfig_path),
            "server": self.server,
            "admin_context": self.admin_context,
            "provider_context": self.provider_context,
            "cold_start_seconds": self.cold_start_seconds,
            "processes": [p.to_record() for p in self.processes],
            "scheduling": self.scheduling,
            "gpu_product_label": self.gpu_product_label,
            "real_node": self.real_node,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        if data.get("version") != _FORMAT_VERSION:
            raise StateError(f"unsupported state format version {data.get('version')!r}")
        return cls(
            workdir=Path(data["workdir"]),
            kubeconfig_path=Path(data["kubeconfig_path"]),
            server=str(data["server"]),
            admin_context=str(data["admin_context"]),
            provider_context=str(data["provider_context"]),
            cold_start_seconds=float(data["cold_start_seconds"]),
            processes=[ManagedProcess.from_record(p) for p in data["processes"]],
            scheduling=bool(data.get("scheduling", False)),
            gpu_product_label=str(data.get("gpu_product_label", DEFAULT_PRODUCT_LABEL)),
            real_node=data.get("real_node"),
        )

    def any_running(self) -> bool:
        node = [] if self.real_node is None else RealNodeRuntime.from_json(self.real_node).processes
        return any(p.is_running() for p in [*self.processes, *node])


def save_state(state_dir: Path, state: ClusterState) -> Path:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n", encoding="utf-8")
    # Atomic replace: a crash mid-write must not leave `down` without pids.
    os.replace(tmp, path)
    return path


def load_state(state_dir: Path) -> ClusterState | None:
    """The recorded cluster, or None when the directory records none."""
    path = state_dir / STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return ClusterState.from_json(json.loads(text))
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"cannot read {path}: {exc}") from exc


def teardown(
    processes: list[ManagedProcess],
    workdir: Path | None,
    *,
    grace: float,
    keep_workdir: bool = False,
) -> list[str]:
    """Stop ``processes`` newest first, then delete ``workdir``; return errors.

    Every step is attempted even if an earlier one fails, so a single stuck
    daemon does not leave the others running.  ``keep_workdir`` keeps it for inspection
    (the real node's teardown failed: something may still be mounted there).
    """
    errors: list[str] = []
    for process in reversed(processes):
        try:
            stop_process(process, grace=grace)
        except (ProcessStopError, OSError) as exc:
            errors.append(str(exc))
    if workdir is not None and workdir.exists():
        if errors or keep_workdir:
            # Something may still write there; keep it (and its logs) for inspection.
            errors.append(f"kept {workdir} because its processes or mounts survived")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
            if workdir.exists():
                errors.append(f"could not remove {workdir}")
    return errors


def stop_recorded(state_dir: Path, *, grace: float = 15.0) -> tuple[bool, list[str]]:
    """Tear down the cluster recorded in ``state_dir`` and remove the directory.

    Returns (found, errors).  Idempotent: with nothing recorded it returns
    (False, []) and leaves the filesystem alone.
    """
    state = load_state(state_dir)
    if state is None:
        return False, []
    node = None if state.real_node is None else RealNodeRuntime.from_json(state.real_node)
    errors = [] if node is None else node.teardown(grace=grace)
    errors += teardown(state.processes, state.workdir, grace=grace, keep_workdir=bool(errors))
    if not errors:
        shutil.rmtree(state_dir, ignore_errors=True)
    return True, errors
