"""``python -m benchmarks.phases N...``: where one incremental ``ensure`` spends its time.

For each N: a stack of N intents is applied (untimed), then one intent is added, the step a
rolling change repeats, and its wall time is cut into phases by the moments the engine's events
reach the driver: before the first event (the driver's planning over one snapshot, then the
Pulumi CLI starting), up to the first resource event (the program served from the driver's
process: its start, validation, policy), the resource events (the program registering every
intent and the engine stepping each resource), up to the summary, and after it (the CLI's exit,
the driver's per-key results). A profile for deciding what to remove, not a benchmark: one run
per N, no floor, not written to ``benchmarks/results``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass

from pulumi import automation as auto

from benchmarks import scenario
from benchmarks.workbench import Workbench
from infercrane_pulumi.automation import NamespaceStack


@dataclass(frozen=True)
class Phases:
    n: int
    resources_registered: int  # resources the engine stepped (components and objects)
    total_s: float
    before_first_event_s: float
    to_first_resource_s: float
    resources_s: float
    to_summary_s: float
    after_summary_s: float


def _marks(events: Sequence[tuple[float, auto.EngineEvent]]) -> tuple[float, float, float, int]:
    """When the first and the last resource event and the summary reached the driver, and how
    many resources the engine stepped (its summary's count: the driver does not read the
    steps of the keys a run carries)."""
    steps = [t for t, e in events if e.resource_pre_event or e.res_outputs_event]
    [(summary, stepped)] = [(t, e.summary_event) for t, e in events if e.summary_event]
    return steps[0], steps[-1], summary, sum(stepped.resource_changes.values())


@contextlib.contextmanager
def stack_of(
    bench: Workbench, n: int, name: str, on_event: Callable[[auto.EngineEvent], None] | None = None
) -> Iterator[NamespaceStack]:
    """A stack of N intents, applied untimed, destroyed afterwards."""
    stack = NamespaceStack(
        bench.namespace(name),
        bench.env,
        bench.workspace(name),
        stack_name=name,
        on_event=on_event,
    )
    stack.ensure(scenario.intents(n))
    yield stack
    stack.destroy()


def add_one(stack: NamespaceStack, n: int) -> None:
    """The step measured: one intent added to a stack of N."""
    result = stack.ensure([*scenario.intents(n), scenario.extra_intent(n)])
    if result.summary.add != 1 or result.summary.same != n:
        raise scenario.UnexpectedResultError(f"N={n} add 1: {result.summary}")


def profile(bench: Workbench, n: int) -> Phases:
    events: list[tuple[float, auto.EngineEvent]] = []
    with stack_of(bench, n, f"phases-{n}", lambda e: events.append((time.monotonic(), e))) as stack:
        events.clear()
        began = time.monotonic()
        add_one(stack, n)
        ended = time.monotonic()
        first, last, summary, registered = _marks(events)  # before the destroy's events
    return Phases(
        n=n,
        resources_registered=registered,
        total_s=round(ended - began, 2),
        before_first_event_s=round(events[0][0] - began, 2),
        to_first_resource_s=round(first - events[0][0], 2),
        resources_s=round(last - first, 2),
        to_summary_s=round(summary - last, 2),
        after_summary_s=round(ended - summary, 2),
    )


def main(argv: Sequence[str]) -> int:
    with Workbench.open() as bench:
        for n in (int(arg) for arg in argv):
            print(json.dumps(asdict(profile(bench, n))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
