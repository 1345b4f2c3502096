"""Every process of one engine run, found by the session it was started in, and ended with it.

The CLI starts each plugin in a process group of its own (Pulumi's ``cmdutil``), so neither
the CLI's pid nor its process group reaches them: a CLI killed by a signal or the OOM killer
leaves its plugins running, in a long-lived driver for as long as it lives. The CLI is started
as the leader of a new session (``engine.process``), which its plugins keep whatever group they
move to; when the run ends, however it ends, what is left of that session is stopped
(``end``): SIGTERM, then SIGKILL after a grace. Linux only (it reads ``/proc``); elsewhere the
CLI's own group alone is signalled.

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
# States of a task that has finished running and waits to be reaped.
DEAD_STATES = frozenset("ZXx")
GRACE_SECONDS = 5.0
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ProcessStat:
    """The fields of ``/proc/<pid>/stat`` this project reads."""

    state: str
    ppid: int
    pgid: int
    session: int
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
        state=fields[0],
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        session=int(fields[3]),
        start_ticks=int(fields[19]),
    )


def members(session: int) -> list[int]:
    """The live processes of ``session`` (zombies are not)."""
    if not PROC.is_dir():
        try:
            os.killpg(session, 0)
        except (ProcessLookupError, PermissionError):
            return []
        return [session]
    found = []
    for entry in PROC.iterdir():
        stat = read_stat(int(entry.name)) if entry.name.isdigit() else None
        if stat is not None and stat.session == session and stat.alive:
            found.append(int(entry.name))
    return found


def end(session: int, *, grace: float = GRACE_SECONDS) -> list[int]:
    """Stop every process left in ``session``: SIGTERM, then SIGKILL to those left after
    ``grace`` seconds; what still runs ``grace`` seconds later (none: a process the kernel
    holds in an uninterruptible wait)."""
    for stop in (signal.SIGTERM, signal.SIGKILL):
        left = members(session)
        if not left:
            return []
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if PROC.is_dir():
                    os.kill(pid, stop)
                else:
                    os.killpg(pid, stop)
        deadline = time.monotonic() + grace
        while members(session) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
    return members(session)
