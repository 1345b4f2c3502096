"""Every process of one engine run, found by the mark in its environment, and ended with it.

The CLI starts each plugin in a process group of its own (Pulumi's ``cmdutil``), so neither
the CLI's pid nor its process group reaches them: a CLI killed by a signal or the OOM killer
leaves its plugins running, in a long-lived driver for as long as it lives. So every process
of a run carries the run's mark (``MARK_ENV``, a random token), which the CLI hands on to its
plugins with the rest of its environment, and when the run ends, however it ends, what still
carries the mark is stopped (``stop``): found by its environment rather than its parent,
because a plugin whose CLI died is re-parented. The CLI stays in its driver's process group, so
that whatever ends the driver's group (a terminal's Ctrl-C, a host's death as the suite plays
it) ends its engine too. A lost lease stops its run the same way (``fencing``, its own mark).
Linux only (it reads ``/proc``); it never signals a process without the mark.

A stopped process that is not this one's child is reaped by its parent or by the init process
(the runner image runs one: ``tini``); until then it is a zombie, which counts as ended.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
MARK_ENV = "INFERCRANE_RUN"
# States of a task that has finished running and waits to be reaped.
DEAD_STATES = frozenset("ZXx")
GRACE_SECONDS = 5.0  # how long a process is given to end on SIGTERM
KILL_SECONDS = 5.0  # how long SIGKILL is sent until none is left
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ProcessStat:
    """The fields of ``/proc/<pid>/stat`` this project reads."""

    state: str
    ppid: int
    pgid: int
    start_ticks: int

    @property
    def alive(self) -> bool:
        return self.state not in DEAD_STATES


def read_stat(pid: int) -> ProcessStat | None:
    """``pid``'s stat line (None: gone, or no ``/proc``)."""
    try:
        text = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses; every field after its
    # closing parenthesis is separated by one space.
    fields = text[text.rindex(")") + 2 :].split()
    return ProcessStat(
        state=fields[0], ppid=int(fields[1]), pgid=int(fields[2]), start_ticks=int(fields[19])
    )


def marked(name: str, token: str) -> list[int]:
    """The live processes whose environment holds ``name=token`` (this process excluded)."""
    needle = f"{name}={token}".encode()
    found = []
    for entry in PROC.iterdir() if PROC.is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        stat = read_stat(int(entry.name))
        with contextlib.suppress(OSError):  # gone while we looked
            if stat is not None and stat.alive and needle in _environ(entry):
                found.append(int(entry.name))
    return found


def _environ(entry: Path) -> list[bytes]:
    return (entry / "environ").read_bytes().split(b"\0")


def stop(name: str, token: str, *, grace: float = GRACE_SECONDS) -> list[int]:
    """Stop every process marked ``name=token``, those that start meanwhile too: SIGTERM for
    ``grace`` seconds (none: SIGKILL at once), then SIGKILL until none is left, for at most
    ``KILL_SECONDS`` (a process the kernel holds in an uninterruptible wait may outlast it);
    the pids signalled."""
    signalled: list[int] = []
    for stop_with, within in ((signal.SIGTERM, grace), (signal.SIGKILL, KILL_SECONDS)):
        deadline = time.monotonic() + within
        while time.monotonic() < deadline and (pids := marked(name, token)):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, stop_with)
            signalled += [pid for pid in pids if pid not in signalled]
            time.sleep(POLL_SECONDS)
    return signalled
