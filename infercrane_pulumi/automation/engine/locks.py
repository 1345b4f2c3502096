"""Stack locks of the file backend, read as data: who holds a stack, and whether they live;
and a lock of this process's own, taken and given back as the CLI does.

Pulumi's DIY backends lock a stack with one JSON file per running operation
(``.pulumi/locks/<org>/<project>/<stack>/<id>.json``, holding pid and hostname; the file
backend's blob driver writes its attributes beside it, ``<id>.json.attrs``). A lock whose
process is gone from this host was left by a run that died (SIGKILL); any other lock belongs
to a live operation, on this host or another, and means the stack is busy. The CLI takes a
stack by writing its lock and then looking: any other lock there and it removes its own and
refuses, as busy. So a lock of ours in that layout (``own_lock``) keeps every other CLI off the
stack while we change its lock files or its checkpoint (``recovery``).

The layout is Pulumi's, not a documented interface, so this reader fails closed: a file under
``.pulumi/locks`` that is not a lock in that layout, a lock whose holder cannot be read, or a
directory there that cannot be listed (which may hold any stack's locks), is a lock of an
unknown holder, which is never stale. A stack then reads as held (busy, retryable) until the
file goes or the directory can be read: never as free while an operation may hold it.
"""

from __future__ import annotations

import contextlib
import datetime
import getpass
import json
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_NAME = "infercrane"
LOCKS_DIR = (".pulumi", "locks")
ORGANIZATION = "organization"  # the DIY backend's one organization
ATTRIBUTES = ".json.attrs"
# How long a lock file that does not parse is given to be finished (the CLI writes it whole, so
# a half-written one is a moment's) before its holder counts as unknown.
HALF_WRITTEN_SECONDS = 0.2


@dataclass(frozen=True)
class Lock:
    path: Path
    pid: int | None  # None: a holder this reader cannot name
    hostname: str | None

    @property
    def stale(self) -> bool:
        """Held by a process that no longer exists on this host (never one it cannot name)."""
        return (
            self.pid is not None and self.hostname == socket.gethostname() and not _alive(self.pid)
        )

    def fenced(self, engines: frozenset[tuple[str, int]]) -> bool:
        """Held by a process that no longer runs: on this host, gone (``stale``); on another,
        one of ``engines``, which holders of the stack's lease started and their fence stopped
        (never a holder this reader cannot name, nor another host's process of no lease)."""
        if self.hostname == socket.gethostname():
            return self.stale
        return self.pid is not None and (self.hostname, self.pid) in engines

    @property
    def holder(self) -> str:
        if self.pid is None:
            return f"an unknown holder ({self.path.name}: not a lock this reader knows)"
        return f"process {self.pid} on {self.hostname}"


def stack_locks(state_dir: Path | None, stack_name: str) -> list[Lock]:
    """Every lock of the stack (none when the backend is not a local directory), and a lock of
    an unknown holder for every file under the locks directory that is not in Pulumi's
    layout."""
    if state_dir is None:
        return []
    root = state_dir.joinpath(*LOCKS_DIR)
    files, unreadable = _files(root)
    found = [Lock(path, None, None) for path in unreadable]
    for path in sorted(files):
        parts = path.relative_to(root).parts
        if len(parts) == 4 and path.name.endswith(ATTRIBUTES) and path.with_suffix("").exists():
            continue  # a lock's blob attributes, beside it
        if len(parts) != 4 or path.suffix != ".json":
            found.append(Lock(path, None, None))  # a layout this reader does not know
        elif parts[1:3] == (PROJECT_NAME, stack_name):
            lock = _read(path)
            if lock is not None:
                found.append(lock)
    return found


@contextlib.contextmanager
def own_lock(state_dir: Path, stack_name: str) -> Iterator[Path]:
    """A lock of this process on the stack for the body, in the CLI's layout and content (pid,
    username, hostname, timestamp, which the CLI prints when it refuses); its path. Written
    aside and renamed into place, so that no reader ever sees half of it; removed at the end.
    Whether another holder is there too is the caller's to read (``stack_locks``)."""
    directory = state_dir.joinpath(*LOCKS_DIR, ORGANIZATION, PROJECT_NAME, stack_name)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{uuid.uuid4()}.json"
    content = {
        "pid": os.getpid(),
        "username": _username(),
        "hostname": socket.gethostname(),
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(),
    }
    # Beside the locks directory, not in it: a reader there would take it for a lock.
    with tempfile.NamedTemporaryFile(
        "w", dir=state_dir / LOCKS_DIR[0], prefix=".lock-", delete=False, encoding="utf-8"
    ) as staged:
        json.dump(content, staged)
    os.replace(staged.name, path)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def remove_lock(lock: Lock) -> None:
    """Delete ``lock``'s file and its blob attributes beside it (either may be gone already)."""
    lock.path.unlink(missing_ok=True)
    lock.path.with_suffix(ATTRIBUTES).unlink(missing_ok=True)


def _username() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        return str(os.getuid())


def _files(root: Path) -> tuple[list[Path], list[Path]]:
    """Every file under ``root``, and every directory there that could not be listed (no
    ``root`` at all: no operation ever locked a stack here)."""
    files: list[Path] = []
    unreadable: list[Path] = []

    def failed(error: OSError) -> None:
        if not (isinstance(error, FileNotFoundError) and Path(error.filename or "") == root):
            unreadable.append(Path(error.filename or root))

    for directory, _, names in os.walk(root, onerror=failed):
        files.extend(Path(directory, name) for name in names)
    return files, unreadable


def _read(path: Path) -> Lock | None:
    """The lock at ``path``; None once it is gone (released while we looked)."""
    deadline = time.monotonic() + HALF_WRITTEN_SECONDS
    while True:
        try:
            content: Any = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            if time.monotonic() < deadline:
                time.sleep(HALF_WRITTEN_SECONDS / 4)
                continue
            return Lock(path, None, None)
        return _holder(path, content)


def lock_blob(path: Path, raw: bytes) -> Lock:
    """The lock a blob of the backend holds (read whole: the CLI writes it in one put)."""
    try:
        content: Any = json.loads(raw)
    except ValueError:
        return Lock(path, None, None)
    return _holder(path, content)


def lock_prefix(stack_name: str) -> str:
    """Where the backend keeps the stack's locks, as a blob key prefix."""
    return "/".join((*LOCKS_DIR, ORGANIZATION, PROJECT_NAME, stack_name)) + "/"


def _holder(path: Path, content: Any) -> Lock:
    pid = content.get("pid") if isinstance(content, Mapping) else None
    hostname = content.get("hostname") if isinstance(content, Mapping) else None
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(hostname, str):
        return Lock(path, None, None)
    return Lock(path, pid, hostname)


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
