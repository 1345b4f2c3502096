"""Progress lines while a long run goes on, and the one way a step gets measured.

A full run takes an hour; every step prints when it starts and what it cost when it ends, and a
step still running prints a heartbeat (with the caller's status, e.g. engine events so far), so
a stalled run is told apart from a slow one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from benchmarks.sampling import Meter, Usage

T = TypeVar("T")


def clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m{rest:02d}s"


class Progress:
    def __init__(self, server_pids: Sequence[int] = ()) -> None:
        self.began = time.monotonic()
        self.server_pids = tuple(server_pids)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def say(self, text: str) -> None:
        print(f"[{clock(self.elapsed)}] {text}", flush=True)

    def measure(
        self, label: str, step: Callable[[], T], status: Callable[[], str] | None = None
    ) -> tuple[T, Usage]:
        self.say(f"{label} ...")
        started = time.monotonic()

        def heartbeat() -> None:
            extra = f", {status()}" if status is not None else ""
            self.say(f"  {label}: running for {time.monotonic() - started:.0f} s{extra}")

        with Meter(self.server_pids, heartbeat) as meter:
            value = step()
        usage = meter.usage
        self.say(
            f"{label}: {usage.wall_s:.2f} s wall; CPU {usage.cpu_self_s:.2f} s this process"
            f" + {usage.cpu_children_s:.2f} s children, API server {usage.cpu_server_s:.2f} s"
        )
        return value, usage


class EventCounter:
    """An ``on_event`` hook counting the engine's events, for heartbeats (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Count from zero again (before each step)."""
        with self._lock:
            self.events = 0
            self.resources_done = 0

    def __call__(self, event: Any) -> None:
        with self._lock:
            self.events += 1
            if getattr(event, "res_outputs_event", None) is not None:
                self.resources_done += 1

    def status(self) -> str:
        return f"{self.events} engine events, {self.resources_done} resource steps done"
