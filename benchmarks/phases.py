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

import json
import sys
import time
from collections.abc import Sequence
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


def profile(bench: Workbench, n: int) -> Phases:
    events: list[tuple[float, auto.EngineEvent]] = []
    name = f"phases-{n}"
    stack = NamespaceStack(
        bench.namespace(name),
        bench.env,
        bench.workspace(name),
        stack_name=name,
        on_event=lambda event: events.append((time.monotonic(), event)),
    )
    desired = scenario.intents(n)
    stack.ensure(desired)
    events.clear()
    began = time.monotonic()
    result = stack.ensure([*desired, scenario.extra_intent(n)])
    ended = time.monotonic()
    if result.summary.add != 1 or result.summary.same != n:
        raise scenario.UnexpectedResultError(f"N={n} add 1: {result.summary}")
    first, last, summary, registered = _marks(events)
    stack.destroy()
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
