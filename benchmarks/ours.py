"""Our side of each comparison: the real engine driven through ``NamespaceStack``, the API the
InferCrane control plane calls (validation, stack config, refresh, preflight, the Pulumi CLI,
the Python program served from this process, pulumi-resource-kubernetes, per-key results).

Every step's result is checked (N creates, no change, one update, N deletes) so a number is
never reported for a run that did something else; durations are never checked.
"""

from __future__ import annotations

from collections.abc import Callable

from benchmarks import scenario
from benchmarks.progress import EventCounter, Progress
from benchmarks.sampling import Usage
from benchmarks.workbench import Workbench
from infercrane_pulumi.automation import NamespaceStack, StackResult


def expect(what: str, result: StackResult, wanted: Callable[[StackResult], bool]) -> None:
    if not wanted(result):
        raise scenario.UnexpectedResultError(f"{what}: unexpected result {result.summary}")


def open_stack(
    bench: Workbench, namespace: str, stack_name: str, events: EventCounter
) -> NamespaceStack:
    """A fresh stack, created outside the measured steps (a one-time cost per namespace)."""
    stack = NamespaceStack(
        bench.namespace(namespace),
        bench.env,
        bench.workspace(stack_name),
        stack_name=stack_name,
        on_event=events,
    )
    stack.stack()
    return stack


def lifecycle(
    bench: Workbench, progress: Progress, n: int, rep: int
) -> tuple[dict[str, Usage], int]:
    """One repetition at N: first up, no-op up, preview of one change, destroy. Returns each
    step's usage and the state file's size after the first up."""
    namespace = f"bench-{n}-ours"
    events = EventCounter()
    stack = open_stack(bench, namespace, f"ours-{n}-r{rep}", events)
    desired = scenario.intents(n)
    grown = [*desired, scenario.extra_intent(n)]
    steps: dict[str, tuple[Callable[[], StackResult], Callable[[StackResult], bool]]] = {
        "up": (lambda: stack.ensure(desired), lambda r: r.summary.add == n),
        "noop": (lambda: stack.ensure(desired), lambda r: r.summary.same == n),
        "add1": (
            lambda: stack.ensure(grown),
            lambda r: r.summary.add == 1 and r.summary.same == n,
        ),
        "preview": (
            lambda: stack.preview(scenario.with_one_changed(grown)),
            lambda r: r.summary.change == 1 and r.summary.same == n,
        ),
        "destroy": (stack.destroy, lambda r: r.summary.destroy == n + 1),
    }
    usages: dict[str, Usage] = {}
    state_bytes = 0
    for key, (call, wanted) in steps.items():
        label = f"N={n} rep {rep} ours {scenario.OPERATIONS[key]}"
        events.reset()
        result, usages[key] = progress.measure(label, call, events.status)
        expect(label, result, wanted)
        if key == "up":
            state_bytes = bench.state_bytes(stack.stack_name)
        bench.settle(namespace, scenario.pods_after(key, n), progress.say)
    return usages, state_bytes
