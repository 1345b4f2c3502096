"""The machine's record of its real node, so that the next start puts back what a killed run left.

A real node changes the host outside its workdir (a bridge, iptables chains, cgroups, tunables:
see :mod:`.hoststate`), and its teardown puts that back.  A run killed outright (SIGKILL, a
cancelled CI job, a machine's session ended) never reaches its teardown, and its in-memory
record of the host went with it: the next start would find the bridge and refuse, with nothing
left to undo it by.  So the node writes its runtime record to :data:`RECORD_PATH` as it takes
each step, naming its owner process (none once detached: ``up`` hands the node to ``down``),
and its teardown removes the record.  A record left behind names an **abandoned** node when the
machine lock is free (every process of that node is gone) or when its owner died; the next
start tears it down from the record, under the lock, before its own checks.

``/run`` is cleared at boot, as is everything the record describes (interfaces, chains,
tunables), so a record never outlives what it describes.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from . import hostlock
from .processes import is_alive, process_start_ticks

RECORD_PATH = Path("/run/infercrane-real-node.json")


def save(node: dict[str, Any], *, owner: int | None, path: Path = RECORD_PATH) -> None:
    """Record ``node`` (a runtime record) as this machine's real node, owned by pid ``owner``."""
    who = None if owner is None else {"pid": owner, "start_ticks": process_start_ticks(owner)}
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(json.dumps({"owner": who, "node": node}), encoding="utf-8")
    # Atomic: a run killed while writing leaves the previous record, never half of one.
    os.replace(staged, path)


def forget(root: Path, path: Path = RECORD_PATH) -> None:
    """Remove the record if it is the one of the node whose workdir is ``root``."""
    recorded = _load(path)
    if recorded is not None and recorded["node"].get("root") == str(root):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _load(path: Path) -> dict[str, Any] | None:
    try:
        recorded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return recorded


def _owner_died(owner: Any) -> bool:
    if not isinstance(owner, dict):
        return False  # detached: only the lock says whether it still runs
    pid, ticks = int(owner["pid"]), owner.get("start_ticks")
    return not is_alive(pid) or (ticks is not None and process_start_ticks(pid) != ticks)


def abandoned(path: Path = RECORD_PATH, lock: Path = hostlock.LOCK_PATH) -> dict[str, Any] | None:
    """The runtime record of a real node nobody will tear down (see the module's docstring)."""
    recorded = _load(path)
    if recorded is None:
        return None
    if hostlock.is_locked(lock) is None or _owner_died(recorded.get("owner")):
        node: dict[str, Any] = recorded["node"]
        return node
    return None
