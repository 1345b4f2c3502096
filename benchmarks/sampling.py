"""What one measured step cost: wall time, CPU per party, and each process's peak memory.

A real-engine run is several processes that start and end inside the step (pulumi CLI,
pulumi-resource-kubernetes; a plain program's language host and Python program), so totals
alone cannot say where the
time and memory go. CPU totals come from rusage: ``RUSAGE_SELF`` for this process and the
``RUSAGE_CHILDREN`` delta for every child that ended and was reaped during the step (which
includes the descendants that child reaped in turn). Peak memory and per-process CPU come from
sampling ``/proc`` every ~100 ms: every descendant of this process except the control plane's
daemons, whose CPU is reported apart as the API server's share.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
INTERVAL_SECONDS = 0.1
HEARTBEAT_SECONDS = 30.0
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
SELF_NAME = "benchmark process"
# The Pulumi binaries by executable name; /proc/<pid>/comm is cut at 15 characters.
KNOWN = {
    "pulumi": "pulumi CLI",
    "pulumi-language-python": "language host",
    "pulumi-resource-kubernetes": "pulumi-resource-kubernetes",
}
UNKNOWN = "?"
PROGRAM_SHIM = "pulumi-language-python-exec"  # the language host runs the program through it


@dataclass(frozen=True)
class ProcessUse:
    """All processes of one name during a step: how many, the largest peak RSS, summed CPU."""

    count: int
    peak_rss_mib: float
    cpu_s: float


@dataclass(frozen=True)
class Usage:
    wall_s: float
    cpu_self_s: float  # this process (RUSAGE_SELF), without the sampler thread itself
    cpu_children_s: float  # RUSAGE_CHILDREN delta: children that ended during the step
    cpu_server_s: float  # etcd + kube-apiserver + kube-controller-manager, from /proc
    processes: dict[str, ProcessUse]


@dataclass(frozen=True)
class _Stat:
    ticks: int  # utime + stime
    start: int  # start time in ticks since boot: with the pid, identifies one process


def _stat(pid: int) -> _Stat | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None  # ended since it was listed
    # The command name may hold spaces and parentheses; the fields follow the last ')'.
    fields = text[text.rindex(")") + 2 :].split()
    return _Stat(ticks=int(fields[11]) + int(fields[12]), start=int(fields[19]))


def _memory_kib(pid: int | str) -> int:
    """max(VmHWM, VmRSS) in KiB: the high-water mark survives between two samples."""
    try:
        lines = (PROC / str(pid) / "status").read_text().splitlines()
    except OSError:
        return 0
    values = [int(line.split()[1]) for line in lines if line.startswith(("VmHWM:", "VmRSS:"))]
    return max(values, default=0)


def process_name(pid: int) -> str:
    try:
        argv = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return UNKNOWN
    names = [Path(arg.decode(errors="replace")).name for arg in argv if arg]
    if PROGRAM_SHIM in names[1:3]:
        return "Python program"
    return KNOWN.get(names[0], names[0]) if names else UNKNOWN


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (each thread of a Go binary may be a parent)."""
    found = []
    with contextlib.suppress(OSError):
        for task in (PROC / str(pid) / "task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def descendants(root: int, excluded: frozenset[int]) -> list[int]:
    """Every process below ``root``, leaving out ``excluded`` and what runs below them."""
    found, todo = [], [root]
    while todo:
        for child in _children(todo.pop()):
            if child not in excluded:
                found.append(child)
                todo.append(child)
    return found


def reset_own_peak() -> None:
    """Make this process's VmHWM restart from its current RSS (Linux >= 4.0, own process)."""
    with contextlib.suppress(OSError):
        (PROC / "self" / "clear_refs").write_text("5")


class _Sampler:
    """The /proc side of one step, run on a thread so the step itself is not interrupted."""

    def __init__(self, server_pids: Sequence[int], heartbeat: Callable[[], None] | None) -> None:
        self._server = frozenset(server_pids)
        self._heartbeat = heartbeat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-sampler", daemon=True)
        self._names: dict[tuple[int, int], str] = {}
        self._peak: dict[tuple[int, int], int] = {}
        self._first: dict[tuple[int, int], int] = {}
        self._last: dict[tuple[int, int], int] = {}
        self._server_start = self._server_ticks()
        self._server_end = self._server_start
        self.thread_cpu_s = 0.0
        self._sample(initial=True)

    def _server_ticks(self) -> int:
        return sum(stat.ticks for pid in self._server if (stat := _stat(pid)) is not None)

    def _sample(self, *, initial: bool = False) -> None:
        self._server_end = self._server_ticks()
        for pid in descendants(os.getpid(), self._server):
            stat = _stat(pid)
            if stat is None:
                continue
            key = (pid, stat.start)
            if key not in self._first:
                # A process already running when the step began counts from then on.
                self._first[key] = stat.ticks if initial else 0
            # Named again at every sample: a child seen between fork and exec still shows its
            # parent's command line and memory, so an exec starts its peak afresh (as VmHWM
            # does); a zombie shows no name at all, so the last one is kept.
            name = process_name(pid)
            if name != self._names.get(key, name) and name != UNKNOWN:
                self._peak[key] = 0
            if name != UNKNOWN or key not in self._names:
                self._names[key] = name
            self._last[key] = stat.ticks
            self._peak[key] = max(self._peak.get(key, 0), _memory_kib(pid))

    def _loop(self) -> None:
        began = time.thread_time()
        next_beat = time.monotonic() + HEARTBEAT_SECONDS
        while not self._stop.wait(INTERVAL_SECONDS):
            self._sample()
            if self._heartbeat is not None and time.monotonic() >= next_beat:
                self._heartbeat()
                next_beat += HEARTBEAT_SECONDS
        self._sample()
        self.thread_cpu_s = time.thread_time() - began

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def server_cpu_s(self) -> float:
        return (self._server_end - self._server_start) / TICKS_PER_SECOND

    def processes(self) -> dict[str, ProcessUse]:
        grouped: dict[str, list[tuple[int, int]]] = {}
        for key, name in self._names.items():
            if name != UNKNOWN:  # only ever seen as a zombie: nothing left to attribute
                grouped.setdefault(name, []).append(key)
        return {
            name: ProcessUse(
                count=len(keys),
                peak_rss_mib=max(self._peak[k] for k in keys) / 1024,
                cpu_s=sum(self._last[k] - self._first[k] for k in keys) / TICKS_PER_SECOND,
            )
            for name, keys in sorted(grouped.items())
        }


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


class Meter:
    """``with Meter(...) as meter: step()`` then ``meter.usage``."""

    def __init__(
        self, server_pids: Sequence[int] = (), heartbeat: Callable[[], None] | None = None
    ) -> None:
        self._server_pids = server_pids
        self._heartbeat = heartbeat
        self._usage: Usage | None = None

    def __enter__(self) -> Meter:
        reset_own_peak()
        self._sampler = _Sampler(self._server_pids, self._heartbeat)
        self._self = _cpu(resource.RUSAGE_SELF)
        self._children = _cpu(resource.RUSAGE_CHILDREN)
        self._began = time.perf_counter()
        self._sampler.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        wall = time.perf_counter() - self._began
        self._sampler.stop()
        self_cpu = _cpu(resource.RUSAGE_SELF) - self._self - self._sampler.thread_cpu_s
        own = ProcessUse(count=1, peak_rss_mib=_memory_kib("self") / 1024, cpu_s=self_cpu)
        self._usage = Usage(
            wall_s=wall,
            cpu_self_s=self_cpu,
            cpu_children_s=_cpu(resource.RUSAGE_CHILDREN) - self._children,
            cpu_server_s=self._sampler.server_cpu_s,
            processes={**self._sampler.processes(), SELF_NAME: own},
        )

    @property
    def usage(self) -> Usage:
        if self._usage is None:
            raise RuntimeError("the measured step has not finished")
        return self._usage
