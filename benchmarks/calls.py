"""``python -m benchmarks.calls N``: a profile of one run, read for what it does how often.

A stack of N intents is applied (untimed), then one intent is added under cProfile in every
thread of this process: the driver plans and reports in the calling thread, and the program is
served to the CLI from gRPC threads of the same process, so one profile holds both ends of the
run. Printed as markdown: how often the run rendered the stack's objects and judged its policy
(once each: issue 41), then the functions with the most cumulative time. One run, no floor: a
profile for reading, not a benchmark (``tests/conformance/test_run_once.py`` is the check).
"""

from __future__ import annotations

import contextlib
import cProfile
import pstats
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import Any

from benchmarks import machine
from benchmarks.phases import add_one, stack_of
from benchmarks.workbench import Workbench
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.policy import rules

# The functions the issue asks to see once per run, by the names the profile gives them.
COUNTED: dict[str, Callable[..., Any]] = {
    "rendering (`workloads.render`)": workloads.render,
    "policy judgement (`rules.evaluate_rendered`)": rules.evaluate_rendered,
}
TOP = 25
PACKAGE = workloads.__name__.partition(".")[0]
ROOT = str(machine.REPO) + "/"  # paths printed from the repository's root


class EveryThread:
    """Every thread's calls while ``running``. Before Python 3.12 a ``cProfile.Profile``
    follows only the thread that enabled it, so each thread started meanwhile enables one of its
    own; from 3.12 cProfile sits on ``sys.monitoring``, which reports every thread's calls to the
    one profiler enabled (and refuses a second)."""

    PER_THREAD = sys.version_info < (3, 12)

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _enable(self) -> None:
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def _on_thread_start(self, frame: FrameType, event: str, arg: object) -> None:
        # threading calls this once, at a new thread's first event; the profiler enabled here
        # replaces it for the rest of the thread.
        self._enable()

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        if self.PER_THREAD:
            threading.setprofile(self._on_thread_start)
        self._enable()
        try:
            yield
        finally:
            if self.PER_THREAD:
                threading.setprofile(None)
            self.profiles[0].disable()

    def stats(self) -> pstats.Stats:
        with self._lock:
            profiles = list(self.profiles)
        # A thread's profile can hold no call when read (seen profiling a first ensure), and
        # pstats refuses an empty profile.
        first, *others = [profile for profile in profiles if _counted_any(profile)]
        stats = pstats.Stats(first)
        for profile in others:
            stats.add(profile)
        return stats


def _counted_any(profile: cProfile.Profile) -> bool:
    profile.create_stats()
    return bool(profile.stats)


def calls_of(stats: pstats.Stats, function: Callable[..., Any]) -> int:
    code = function.__code__
    where = (code.co_filename, code.co_firstlineno, code.co_name)
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    table = stats.stats  # type: ignore[attr-defined]
    return table[where][1] if where in table else 0


def report(n: int, stats: pstats.Stats, wall_s: float) -> str:
    rows = [
        f"# One add-1 run at N={n}, profiled",
        "",
        f"`python -m benchmarks.calls {n}` at {machine.commit()}, {machine.now()}, load "
        f"{machine.load():.2f} at the end; {wall_s:.2f} s wall under the profiler (cProfile "
        "slows Python several times: read the calls and the shares, not the seconds).",
        "",
        "| what | calls in the run |",
        "| --- | --- |",
        *(f"| {what} | {calls_of(stats, f)} |" for what, f in COUNTED.items()),
        "",
        f"The package's {TOP} functions with the most cumulative time, over every thread of the "
        "driver's process (the program served there included; the CLI and the plugin are "
        "other processes, and most of the run's wall time is this process waiting for them):",
        "",
        "```",
    ]
    out = _Lines()
    stats.stream = out  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(f"{PACKAGE}/", TOP)
    return "\n".join([*rows, *(line.replace(ROOT, "") for line in out.lines()), "```", ""])


class _Lines:
    """What ``pstats`` prints, kept from its table's header on."""

    def __init__(self) -> None:
        self._text: list[str] = []

    def write(self, text: str) -> None:
        self._text.append(text)

    def lines(self) -> list[str]:
        printed = "".join(self._text).splitlines()
        start = next(i for i, line in enumerate(printed) if line.strip().startswith("ncalls"))
        return [line.rstrip() for line in printed[start:] if line.strip()]


def main(argv: Sequence[str]) -> int:
    [n] = (int(arg) for arg in argv)
    with Workbench.open() as bench, stack_of(bench, n, f"calls-{n}") as stack:
        threads = EveryThread()
        began = time.monotonic()
        with threads.running():
            add_one(stack, n)
        wall_s = time.monotonic() - began
        stats = threads.stats()
        print(report(n, stats, wall_s), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
