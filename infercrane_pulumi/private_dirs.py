"""Private directories (0700, under the process's temporary directory) for files that must not
outlive the process that wrote them: a kubeconfig's key and certificate data, which the
Kubernetes client library and pulumi-kubernetes both write to files to hand to TLS.

A process removes its directory when it is done with it. A killed process cannot, so each
directory holds a lock (``flock`` on a file inside) for as long as its process lives: the
kernel drops the lock when the process ends, however it ends, and the next process of this
host to make a directory of the same kind removes every one whose lock it can take. The lock's
file is named only once it is locked, so a directory being made is never taken for a left one.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path

LOCK = ".held"
_MAKING = ".making"
_held: dict[Path, int] = {}  # this process's directories: the descriptor holding each lock


def made(prefix: str, within: Path | None = None) -> Path:
    """A new private directory named ``prefix…`` in ``within`` (default: the process's temporary
    directory), after removing those of that prefix whose process is gone (``sweep``)."""
    sweep(prefix, within)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=within))  # 0700
    # Not inherited by the processes this one starts (PEP 446): the lock is this process's.
    descriptor = os.open(path / _MAKING, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_EX)
    os.rename(path / _MAKING, path / LOCK)
    _held[path] = descriptor
    return path


def removed(path: Path) -> None:
    """``path`` (from ``made``) and all it holds removed, its lock released."""
    shutil.rmtree(path, ignore_errors=True)
    descriptor = _held.pop(path, None)
    if descriptor is not None:
        os.close(descriptor)


def sweep(prefix: str, within: Path | None = None) -> list[Path]:
    """Remove the private directories named ``prefix…`` that a process left when it ended
    without removing them (their lock free); those of live processes, and anything not made
    here (no lock file, or another user's), stay. Returns what it removed."""
    left = []
    for entry in sorted((within or Path(tempfile.gettempdir())).glob(f"{prefix}*")):
        try:
            descriptor = os.open(entry / LOCK, os.O_RDWR)
        except OSError:  # not one of ours, being made, or not ours to read
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its process lives
            os.close(descriptor)
            continue
        shutil.rmtree(entry, ignore_errors=True)
        os.close(descriptor)
        left.append(entry)
    return left
