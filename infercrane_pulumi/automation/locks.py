"""Stack locks of the file backend, read as data: who holds a stack, and whether they live.

Pulumi's DIY backends lock a stack with one JSON file per running operation
(``.pulumi/locks/<org>/<project>/<stack>/<id>.json``, holding pid and hostname). A lock whose
process is gone from this host was left by a run that died (SIGKILL); any other lock belongs
to a live operation, on this host or another, and means the stack is busy.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

PROJECT_NAME = "infercrane"


@dataclass(frozen=True)
class Lock:
    path: Path
    pid: int
    hostname: str

    @property
    def stale(self) -> bool:
        """Held by a process that no longer exists on this host."""
        return self.hostname == socket.gethostname() and not _alive(self.pid)


def stack_locks(state_dir: Path | None, stack_name: str) -> list[Lock]:
    """Every lock file of the stack (none when the backend is not a local directory)."""
    if state_dir is None:
        return []
    found = []
    for path in sorted(
        (state_dir / ".pulumi" / "locks").glob(f"*/{PROJECT_NAME}/{stack_name}/*.json")
    ):
        try:
            content = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            continue  # released (or half-written) while we looked
        found.append(Lock(path, int(content.get("pid", 0)), str(content.get("hostname", ""))))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie (dead, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc to ask: the signal's answer stands
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]
