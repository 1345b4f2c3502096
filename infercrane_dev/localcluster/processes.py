"""Start, watch and stop the control-plane daemons as whole process groups.

Each daemon gets its own session (hence its own process group) so that it
survives the Python process that started it when detached, and so that
stopping it can signal everything it may have spawned in one go.  Output goes
to a log file whose last lines are quoted when the daemon fails.

This module must never signal anything it cannot tie to a process it started:
a recorded process is identified by pid *and* kernel start time, so a pid
recycled by an unrelated program is left alone.  It knows nothing about
Kubernetes; readiness is a caller-supplied probe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infercrane_pulumi.automation.engine.marks import DEAD_STATES, PROC, read_stat

# Daemons handed over by release() stay children of this interpreter until it
# exits.  Keeping their Popen objects referenced stops Python from warning that a
# running child was discarded, and lets us still reap them if they die meanwhile.
_RELEASED: list[subprocess.Popen[bytes]] = []


class ProcessStartError(RuntimeError):
    """A daemon exited or did not become ready in time."""


class ProcessStopError(RuntimeError):
    """A daemon's process group survived SIGKILL."""


def process_start_ticks(pid: int) -> int | None:
    """Kernel start time of ``pid`` (clock ticks since boot), or None if unknown."""
    stat = read_stat(pid)
    return None if stat is None else stat.start_ticks


def is_alive(pid: int) -> bool:
    """Running and not a zombie waiting to be reaped."""
    stat = read_stat(pid)
    return stat is not None and stat.state not in DEAD_STATES


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, whatever process group it moved to."""
    parents = {}
    for entry in PROC.iterdir():
        stat = read_stat(int(entry.name)) if entry.name.isdigit() else None
        if stat is not None and stat.state not in DEAD_STATES:
            parents[int(entry.name)] = stat.ppid
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def processes_running(matches: Callable[[list[bytes]], bool]) -> list[int]:
    """Pids of the processes on this host whose argv ``matches`` (read from /proc)."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone while we looked
        if matches(argv):
            found.append(int(entry.name))
    return found


def group_members(pgid: int) -> list[int]:
    """Pids still running (not zombies) in process group ``pgid``."""
    if not PROC.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            pass
        return [pgid]
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = read_stat(int(entry.name))
        if stat is not None and stat.pgid == pgid and stat.state not in DEAD_STATES:
            members.append(int(entry.name))
    return members


def tail_log(path: Path, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file ("" if it cannot be read)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


@dataclass
class ManagedProcess:
    """A daemon started by us; also reconstructible from a saved record."""

    name: str
    pid: int
    pgid: int
    log_path: Path
    start_ticks: int | None
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def returncode(self) -> int | None:
        """Exit code when we are its parent and it has exited; otherwise None."""
        return None if self.popen is None else self.popen.poll()

    def is_running(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        stat = read_stat(self.pid)
        if stat is None or stat.state in DEAD_STATES:
            return False
        return self.start_ticks is None or stat.start_ticks == self.start_ticks

    def leader_is_foreign(self) -> bool:
        """True when our pid now belongs to a different process (pid reuse)."""
        if self.start_ticks is None:
            return False
        stat = read_stat(self.pid)
        return stat is not None and stat.start_ticks != self.start_ticks

    def log_tail(self, lines: int = 30) -> str:
        return tail_log(self.log_path, lines)

    def to_record(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "pgid": self.pgid,
            "log_path": str(self.log_path),
            "start_ticks": self.start_ticks,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ManagedProcess:
        ticks = record.get("start_ticks")
        return cls(
            name=str(record["name"]),
            pid=int(record["pid"]),
            pgid=int(record["pgid"]),
            log_path=Path(str(record["log_path"])),
            start_ticks=None if ticks is None else int(ticks),
        )


def start_process(
    name: str,
    argv: Sequence[str],
    log_path: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    pass_fds: Sequence[int] = (),
) -> ManagedProcess:
    """Start ``argv`` in a new session, stdout+stderr appended to ``log_path``.

    ``pass_fds`` stay open in the child (a lock it holds for us, see :mod:`.hostlock`).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        # The command line heads the log so a failure report shows what was run.
        log.write(f"$ {shlex.join(argv)}\n".encode())
        log.flush()
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
            env=None if env is None else dict(env),
            cwd=cwd,
        )
    # start_new_session makes the child a session and group leader: pgid == pid.
    return ManagedProcess(
        name=name,
        pid=popen.pid,
        pgid=popen.pid,
        log_path=log_path,
        start_ticks=process_start_ticks(popen.pid),
        popen=popen,
    )


def wait_until_ready(
    process: ManagedProcess,
    probe: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.2,
) -> float:
    """Poll ``probe`` until it returns True; return the seconds waited.

    Raises :class:`ProcessStartError` (quoting the log tail) as soon as the
    process exits, or when ``timeout`` passes.  A probe that raises counts as
    "not ready yet"; its last error is reported on timeout.
    """
    started = time.monotonic()
    deadline = started + timeout
    last_error = "probe never succeeded"
    while True:
        if not process.is_running():
            code = process.returncode()
            raise ProcessStartError(
                f"{process.name} exited (code {code}) before becoming ready; "
                f"log {process.log_path}, last lines:\n{process.log_tail()}"
            )
        try:
            if probe():
                return time.monotonic() - started
            last_error = "probe returned not ready"
        except Exception as exc:  # any probe failure means "not yet"
            last_error = f"{type(exc).__name__}: {exc}"
        if time.monotonic() >= deadline:
            raise ProcessStartError(
                f"{process.name} not ready after {timeout:.0f}s ({last_error}); "
                f"log {process.log_path}, last lines:\n{process.log_tail()}"
            )
        time.sleep(interval)


def release(process: ManagedProcess) -> ManagedProcess:
    """A copy of ``process`` that no longer tracks it as our child (for detaching)."""
    if process.popen is not None:
        _RELEASED.append(process.popen)
    return dataclasses.replace(process, popen=None)


def _reap_released() -> None:
    for popen in list(_RELEASED):
        if popen.poll() is not None:
            _RELEASED.remove(popen)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _wait_group_gone(process: ManagedProcess, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if process.popen is not None:
            # Reap our own child so it does not linger as a zombie.
            process.popen.poll()
        _reap_released()
        if not group_members(process.pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def stop_process(process: ManagedProcess, *, grace: float = 10.0, kill_wait: float = 5.0) -> None:
    """SIGTERM the whole group, wait up to ``grace`` s, then SIGKILL it.

    Safe to call on an already-stopped process.  Raises
    :class:`ProcessStopError` only if something survives SIGKILL.
    """
    if process.leader_is_foreign():
        # The pid was recycled; the group id can then only belong to someone else.
        return
    if group_members(process.pgid):
        _signal_group(process.pgid, signal.SIGTERM)
        if not _wait_group_gone(process, grace):
            _signal_group(process.pgid, signal.SIGKILL)
            if not _wait_group_gone(process, kill_wait):
                raise ProcessStopError(
                    f"{process.name} (pgid {process.pgid}) survived SIGKILL: "
                    f"pids {group_members(process.pgid)}"
                )
    if process.popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=kill_wait)


def kill_tree(pid: int, while_frozen: Callable[[], None] = lambda: None) -> dict[int, int | None]:
    """SIGKILL the process group of ``pid`` and every process group below it, as when their
    host dies; the processes it killed, with their start times. Pulumi starts each plugin
    (language host, program, provider) in a process group of its own (``Setpgid``), so the
    driver's group alone would leave them running (an idle provider was seen alive half an
    hour later). Each group is stopped as it is found, so none starts another, then
    ``while_frozen`` runs (the processes alive, doing nothing), then all are killed at once."""
    groups: set[int] = set()
    found: set[int] = set()
    while True:
        found |= descendants(pid) | {pid}
        new = {_group(member) for member in found} - groups - {None, os.getpgrp()}
        if not new:
            break
        fresh = {group for group in new if group is not None}
        for group in fresh:
            _signal_group(group, signal.SIGSTOP)
        groups |= fresh
    killed = {member: process_start_ticks(member) for member in found - {pid}}
    while_frozen()
    for group in groups:
        _signal_group(group, signal.SIGKILL)
    return killed


def _group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None
