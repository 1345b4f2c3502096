"""``up --every``'s loop: again as soon as the file changes, at least every period, and a stop
ends it between runs, never in the middle of one."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from infercrane_pulumi.cli import every


def test_a_changed_file_runs_at_once_and_an_unchanged_one_waits_for_the_period(
    tmp_path: Path,
) -> None:
    watched = tmp_path / "Pulumi.s.yaml"
    watched.write_text("one")
    stopping = threading.Event()
    started: list[float] = []

    def run() -> int:
        started.append(time.monotonic())
        if len(started) == 1:
            watched.write_text("two")  # a change landing during the run
        if len(started) == 3:
            stopping.set()
        return len(started)

    code = every.repeat(run, watched=watched, every=0.5, stopping=stopping, poll=0.01)

    assert code == 3  # the last run's code
    first, second, third = started
    assert second - first < 0.3  # the change: at once, not a period later
    assert third - second >= 0.5  # nothing changed since: one period


def test_a_stop_during_a_run_lets_it_finish_and_starts_no_other(tmp_path: Path) -> None:
    watched = tmp_path / "Pulumi.s.yaml"
    stopping = threading.Event()
    runs: list[str] = []

    def run() -> int:
        stopping.set()  # SIGTERM arrives while the run is in flight
        runs.append("finished")
        return 4

    assert every.repeat(run, watched=watched, every=0.01, stopping=stopping, poll=0.01) == 4
    assert runs == ["finished"]


def test_a_file_that_appears_or_goes_away_counts_as_a_change(tmp_path: Path) -> None:
    watched = tmp_path / "Pulumi.s.yaml"
    stopping = threading.Event()
    started: list[float] = []

    def run() -> int:
        started.append(time.monotonic())
        if len(started) == 1:
            watched.write_text("now it exists")
        elif len(started) == 2:
            watched.unlink()
        else:
            stopping.set()
        return 0

    every.repeat(run, watched=watched, every=60, stopping=stopping, poll=0.01)

    assert len(started) == 3 and started[-1] - started[0] < 5


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_the_loop_after_the_run_in_flight(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """A Pod's SIGTERM, or Ctrl-C at a terminal: the run finishes, no other starts, and no
    KeyboardInterrupt escapes the loop."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    runs: list[int] = []

    def run() -> int:
        os.kill(os.getpid(), stop)
        runs.append(0)
        return 0

    try:
        code = every.until_terminated(run, watched=tmp_path / "Pulumi.s.yaml", every=0.01)
    finally:
        for number, handler in saved.items():
            signal.signal(number, handler)
    assert (code, runs) == (0, [0])
