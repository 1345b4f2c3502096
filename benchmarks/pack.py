"""The policy pack's cost: the same first ``up`` and preview through ``NamespaceStack``, without
and with InferCrane's CrossGuard pack (``policy/``, its defaults), one after the other in one
run, each on a fresh stack. With a pack the engine starts the pack's interpreter, sends it every
object, and an ``up`` previews first (``automation.run``): that is the price measured.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from benchmarks import ours, scenario
from benchmarks.progress import EventCounter, Progress
from benchmarks.sampling import Usage
from benchmarks.workbench import Workbench
from infercrane_dev import REPO_ROOT
from infercrane_pulumi.automation import PolicyPack, StackResult

SIDES = ("without", "with")
OPERATIONS = {"up": "first up", "preview": "preview, 1 changed"}


def lifecycle(
    bench: Workbench, progress: Progress, n: int, rep: int
) -> dict[str, dict[str, Usage]]:
    """One repetition at N: each side's usage per operation."""
    return {side: _side(bench, progress, n, rep, side) for side in SIDES}


def _side(bench: Workbench, progress: Progress, n: int, rep: int, side: str) -> dict[str, Usage]:
    namespace = f"bench-{n}-pack-{side}"
    events = EventCounter()
    stack = ours.open_stack(bench, namespace, f"pack-{side}-{n}-r{rep}", events)
    if side == "with":
        stack = dataclasses.replace(stack, policy_pack=PolicyPack(REPO_ROOT / "policy"))
    desired = scenario.intents(n)
    steps: dict[str, tuple[Callable[[], StackResult], Callable[[StackResult], bool]]] = {
        "up": (functools.partial(stack.ensure, desired), lambda r: r.summary.add == n),
        "preview": (
            functools.partial(stack.preview, scenario.with_one_changed(desired)),
            lambda r: r.summary.change == 1 and r.summary.same == n - 1,
        ),
    }
    usages = {}
    for key, (call, wanted) in steps.items():
        label = f"N={n} rep {rep} {side} the pack {OPERATIONS[key]}"
        events.reset()
        result, usages[key] = progress.measure(label, call, events.status)
        ours.expect(label, result, wanted)
        # The scenario breaks no rule: a finding would mean other work was measured.
        ours.expect(label, result, lambda r: r.policy == ())
    stack.destroy()
    bench.settle(namespace, 0, progress.say)
    return usages
