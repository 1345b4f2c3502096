"""The machine-wide lock that lets only one real node run per machine.

A kubelet, its CNI bridge and kube-proxy own fixed host resources (ports 10248-10256, the
``kubepods`` cgroups, ``KUBE-*`` chains, sysctls), so two real nodes on one machine would
undo each other.  The lock is an ``flock`` on :data:`LOCK_PATH`; its holder is a tiny process
(``sleep infinity``) that inherits the locked file, started first and stopped last, so the
lock outlives a detached ``up`` and is released only after teardown finished, and also when
everything died.  The file names the cluster that holds it, for the one-line refusal.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

from .processes import ManagedProcess, start_process

LOCK_PATH = Path("/run/infercrane-real-node.lock")
HOLDER_NAME = "real-node-lock"


class HostLockedError(RuntimeError):
    """Another real node holds the machine."""


# What holds the lock, for the refusal: a Kind cluster (infercrane_dev.kind) takes it too.
REAL_NODE = "a real node"


def _describe(path: Path) -> str:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        started = f"cluster {holder['workdir']} (started by pid {holder['pid']})"
        return f"{holder.get('what', REAL_NODE)} already runs on this machine: {started}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "a real node already runs on this machine: an unknown holder"


def _open_locked(path: Path) -> int:
    """Open ``path`` and take the lock without waiting; the fd, or raise HostLockedError."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise HostLockedError(f"{_describe(path)}; stop it with its `down` first") from None
        # The previous holder unlinks the file when done: a lock on the unlinked file would
        # exclude nobody, so retry on the file now at the path.
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def is_locked(path: Path = LOCK_PATH) -> str | None:
    """Who holds the lock (one line), or None when it is free."""
    try:
        fd = _open_locked(path)
    except HostLockedError as error:
        return str(error)
    os.close(fd)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    return None


def acquire(
    workdir: Path, log_path: Path, path: Path = LOCK_PATH, *, what: str = REAL_NODE
) -> ManagedProcess:
    """Take the lock for ``workdir`` (``what`` it is, for the refusal) and hand it to a holder
    process; return that process."""
    fd = _open_locked(path)
    try:
        os.ftruncate(fd, 0)
        record = {"workdir": str(workdir), "pid": os.getpid(), "what": what}
        os.write(fd, json.dumps(record).encode())
        # The holder shares the open file description, hence the lock, until it exits.
        return start_process(
            HOLDER_NAME, ["sleep", "infinity"], log_path, pass_fds=(fd,), cwd=workdir
        )
    finally:
        os.close(fd)


@contextlib.contextmanager
def held(path: Path = LOCK_PATH) -> Iterator[None]:
    """Hold the lock in this process meanwhile (to tear down what a killed node left)."""
    fd = _open_locked(path)
    try:
        yield
    finally:
        release_path(path)
        os.close(fd)


def release_path(path: Path = LOCK_PATH) -> None:
    """Remove the lock file; call while the holder still runs, just before stopping it."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
