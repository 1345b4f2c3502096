"""Stop a run that lost its stack lease, so it writes nothing more unguarded.

Every process of a leased run (the Pulumi CLI, the providers; the program is served from the
driver's own process and ends with its engine) inherits the run's marker in its environment
(``MARKER_ENV``, a random token per lease). When the lease is lost, ``stop`` kills every process
carrying that token: found by their environment rather than their parent, because a provider
whose engine died is re-parented. Linux only (``/proc``); it never signals a process without the
token.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

MARKER_ENV = "INFERCRANE_LEASE"
STOP_SECONDS = 5.0  # a run's processes are gone within this (SIGKILL, then a rescan)
_PROC = Path("/proc")


def marked(token: str) -> list[int]:
    """The processes whose environment carries ``token`` (this process excluded)."""
    needle = f"{MARKER_ENV}={token}".encode()
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return found


def stop(token: str) -> list[int]:
    """SIGKILL every process of the run marked ``token`` until none is left (or
    ``STOP_SECONDS`` pass); returns the pids killed. The engine dies in the first sweep, so
    nothing new is started after it."""
    killed: list[int] = []
    deadline = time.monotonic() + STOP_SECONDS
    while (pids := marked(token)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        killed += [pid for pid in pids if pid not in killed]
        time.sleep(0.05)
    return killed
