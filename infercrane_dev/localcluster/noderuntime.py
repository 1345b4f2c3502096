"""The real node's runtime record, and its teardown: what was started and taken on the host,
enough to put everything back, also from the record ``down`` reads (:mod:`.state`).

:meth:`RealNodeRuntime.teardown` stops the daemons in reverse start order, kills what
containers are left, stops containerd and its shims, unmounts, removes the bridge and the
``KUBE-*`` chains, puts the host back as recorded, forgets the machine's record of the node
(:mod:`.noderecord`) and releases the machine lock last.  :func:`reclaim_abandoned` runs that
teardown for a node whose run was killed.  It only ever signals what the node started: its
daemons, their shims and the Pods' processes.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import hostlock, hostnet, hoststate, noderecord
from .layout import NodeLayout
from .processes import ManagedProcess, ProcessStopError, processes_running, stop_process


@dataclass
class RealNodeRuntime:
    """A started (or half-started) real node: enough to tear it down, also from a record."""

    name: str
    layout: NodeLayout
    lock_holder: ManagedProcess | None = None
    baseline: hoststate.HostBaseline | None = None
    # In start order; teardown walks it backwards.
    processes: list[ManagedProcess] = field(default_factory=list)
    # The images the node holds: catalog name (``pause``, ``vllm-openai-standin``, ...) ->
    # the digest-pinned reference a Pod names.
    images: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "images": self.images,
            "root": str(self.layout.root),
            "lock_holder": None if self.lock_holder is None else self.lock_holder.to_record(),
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "processes": [p.to_record() for p in self.processes],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RealNodeRuntime:
        holder = data.get("lock_holder")
        baseline = data.get("baseline")
        return cls(
            name=str(data["name"]),
            layout=NodeLayout(Path(str(data["root"]))),
            lock_holder=None if holder is None else ManagedProcess.from_record(holder),
            baseline=None if baseline is None else hoststate.HostBaseline.from_json(baseline),
            processes=[ManagedProcess.from_record(p) for p in data["processes"]],
            images=dict(data.get("images") or {}),
        )

    def teardown(self, *, grace: float) -> list[str]:
        """Stop everything and put the host back; every step is tried, errors returned."""
        errors: list[str] = []
        daemons = [p for p in self.processes if p.name != "containerd"]
        runtime = [p for p in self.processes if p.name == "containerd"]
        for process in reversed(daemons):
            errors += _stop(process, grace)
        if self.baseline is not None:  # None: the lock was taken, the host not touched yet
            # Containers first (their shims outlive containerd), then containerd and the shims.
            errors += hoststate.kill_pod_processes()
            for process in runtime:
                errors += _stop(process, grace)
            errors += kill_shims(self.layout.containerd.address)
            errors += hoststate.unmount_under(self.layout.root)
            try:
                hostnet.remove_bridge()
            except hostnet.HostNetworkError as error:
                errors.append(str(error))
            errors += hostnet.remove_owned_chains()
            errors += hoststate.restore(self.baseline)
        self.processes = []
        noderecord.forget(self.layout.root)
        errors += self._release_lock(grace)
        return errors

    def _release_lock(self, grace: float) -> list[str]:
        if self.lock_holder is None:
            return []
        hostlock.release_path()
        errors = _stop(self.lock_holder, grace)
        self.lock_holder = None
        return errors


def reclaim_abandoned(*, grace: float) -> tuple[str, list[str]] | None:
    """Tear down the real node a killed run left on this machine, if any (:mod:`.noderecord`).

    Returns what was put back (one line) and the teardown's errors, or None when nothing was
    abandoned (or another start took the machine first).
    """
    record = noderecord.abandoned()
    if record is None:
        return None
    node = RealNodeRuntime.from_json(record)
    holder, node.lock_holder = node.lock_holder, None
    # Its owner died but the lock's holder may live on; stop it (by its recorded start time,
    # never a process that merely reuses its pid) so that the lock can be taken.
    errors = [] if holder is None else _stop(holder, grace)
    try:
        with hostlock.held():
            errors += node.teardown(grace=grace)
    except hostlock.HostLockedError:
        return None
    return f"put back the real node {node.name} a killed run left ({node.layout.root})", errors


def _stop(process: ManagedProcess, grace: float) -> list[str]:
    try:
        stop_process(process, grace=grace)
    except (ProcessStopError, OSError) as error:
        return [str(error)]
    return []


def kill_shims(address: Path) -> list[str]:
    """SIGKILL containerd shims serving ``address`` (they outlive containerd by design)."""
    needle = str(address).encode()
    survivors = []
    for pid in processes_running(
        lambda argv: argv[0].endswith(b"containerd-shim-runc-v2") and needle in argv
    ):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        survivors.append(pid)
    deadline = time.monotonic() + 5.0
    while survivors and time.monotonic() < deadline:
        survivors = [pid for pid in survivors if Path(f"/proc/{pid}/cmdline").exists()]
        time.sleep(0.05)
    return [f"containerd shims survived SIGKILL: {survivors}"] if survivors else []
