"""``up --every``: the runner's loop, which applies one stack file again and again.

A run starts as soon as the file's bytes change (a ConfigMap the kubelet updated, a control
plane's write) and at least every ``every`` seconds, so that what a killed run of another
replica left is taken over within one period even by a replica that was not waiting on the
stack's lease. Runs never overlap: two replicas of the runner on one state backend take turns
through that lease. A stop request ends the loop between runs; a run in flight finishes first
(the Pod's grace period bounds it, and a run killed past it is recovered by the next one, as
any killed run).
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

POLL_SECONDS = 1.0


def _contents(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # gone or unreadable: the run says so, in its own result
        return None


def repeat(
    run: Callable[[], int],
    *,
    watched: Path,
    every: float,
    stopping: threading.Event,
    poll: float = POLL_SECONDS,
) -> int:
    """``run`` until ``stopping`` is set; the last run's exit code."""
    code = 0
    while not stopping.is_set():
        seen = _contents(watched)
        started = time.monotonic()
        code = run()
        while not stopping.wait(poll):
            if time.monotonic() - started >= every or _contents(watched) != seen:
                break
    return code


def until_terminated(run: Callable[[], int], *, watched: Path, every: float) -> int:
    """:func:`repeat` until this process gets SIGTERM (its Pod stopping) or SIGINT (Ctrl-C at a
    terminal, which also reaches the engine of a run in flight, as it would without the loop)."""
    stopping = threading.Event()
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda *_: stopping.set())
    return repeat(run, watched=watched, every=every, stopping=stopping)


def period(text: str) -> float:
    """``--every``'s value: seconds above 0 (argparse's type)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError("a number of seconds above 0")
    return value
