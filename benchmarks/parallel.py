"""Many small stacks at once: S namespaces of M intents each, reconciled by ``ensure_many``.

The control plane may split a large fleet into one stack per namespace and run several at once;
this measures whether that beats one stack holding all S x M intents, on the same machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from benchmarks import ours, scenario
from benchmarks.progress import EventCounter, Progress
from benchmarks.sampling import Usage
from benchmarks.workbench import Workbench
from infercrane_pulumi.automation import NamespaceOutcome, NamespaceStack, ensure_many
from infercrane_pulumi.config.intents import ReplicaIntent

OPERATIONS = ("up", "noop")


def check(label: str, outcomes: Mapping[str, NamespaceOutcome], counter: str, m: int) -> None:
    """Every stack succeeded, and its summary's ``counter`` (add, same, destroy) is ``m``."""
    for namespace, outcome in outcomes.items():
        if outcome.error is not None:
            raise scenario.UnexpectedResultError(f"{label}: {namespace}: {outcome.error}")
        assert outcome.result is not None
        ours.expect(
            f"{label}: {namespace}", outcome.result, lambda r: getattr(r.summary, counter) == m
        )


def many(
    bench: Workbench, progress: Progress, stacks: int, m: int, *, parallel: int, rep: int
) -> dict[str, Usage]:
    """One repetition: first up and no-op up of every stack at once, then (not measured) the
    stacks are emptied again so the next repetition starts from nothing."""
    events = EventCounter()
    requests = {
        namespace: (ours.open_stack(bench, namespace, f"{namespace}-r{rep}", events), intents)
        for namespace, intents in (
            (f"bench-many-{i:02d}", scenario.intents(m)) for i in range(stacks)
        )
    }
    steps: dict[str, tuple[Callable[[], dict[str, NamespaceOutcome]], str]] = {
        "up": (lambda: ensure_many(requests, parallel=parallel), "add"),
        "noop": (lambda: ensure_many(requests, parallel=parallel), "same"),
    }
    usages: dict[str, Usage] = {}
    for key, (call, counter) in steps.items():
        label = f"{stacks}x{m} rep {rep} ensure_many {scenario.OPERATIONS[key]}"
        events.reset()
        outcomes, usages[key] = progress.measure(label, call, events.status)
        check(label, outcomes, counter, m)
        for namespace in requests:
            bench.settle(namespace, m, progress.say)
    emptied: dict[str, tuple[NamespaceStack, list[ReplicaIntent]]] = {
        namespace: (stack, []) for namespace, (stack, _) in requests.items()
    }
    emptying = f"{stacks}x{m} rep {rep} emptying"
    check(emptying, ensure_many(emptied, parallel=parallel), "destroy", m)
    for namespace in requests:
        bench.settle(namespace, 0, progress.say)
    return usages
