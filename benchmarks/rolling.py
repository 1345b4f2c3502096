"""A rolling revision change, as InferCrane's control plane runs one: for each of N replicas in
turn, add its next-revision replica (one ``ensure``), then remove the old one (another), so the
namespace never holds fewer than N. Ours through ``NamespaceStack``, the floor the same steps
with one API client (``floor``: dry-run and apply each new object, delete each old one and wait
until it is gone). Each side's sequence is one measurement; every step's result is checked.

A step's cost depends on N (the stack it runs in), not on how far the change has gone, so
the first ``rolled(n)`` replicas are rolled, never more than ``ROLLED_AT_MOST``: the cost per
step, and the whole change's at that pace, at N=1,000 in minutes rather than hours.
"""

from __future__ import annotations

import time

from benchmarks import floor, ours, scenario
from benchmarks.progress import EventCounter, Progress
from benchmarks.sampling import Usage
from benchmarks.workbench import Workbench
from infercrane_pulumi.automation import StackResult
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects.workloads import KINDS

SIDES = ("ours", "floor")
ROLLED_AT_MOST = 20


def rolled(n: int) -> int:
    """How many of N replicas one measurement rolls (two steps each)."""
    return min(n, ROLLED_AT_MOST)


def lifecycle(bench: Workbench, progress: Progress, n: int, rep: int) -> dict[str, Usage]:
    """One repetition at N: each side's whole rolling change."""
    return {"ours": _ours(bench, progress, n, rep), "floor": _floor(bench, progress, n, rep)}


def _ours(bench: Workbench, progress: Progress, n: int, rep: int) -> Usage:
    namespace = f"bench-{n}-rolling-ours"
    events = EventCounter()
    stack = ours.open_stack(bench, namespace, f"rolling-{n}-r{rep}", events)
    desired = scenario.intents(n)
    ours.expect("rolling: the first up", stack.ensure(desired), lambda r: r.summary.add == n)
    bench.settle(namespace, n, progress.say)

    def roll() -> None:
        current = list(desired)
        for old in desired[: rolled(n)]:
            new = scenario.next_revision(old)
            current.append(new)
            added = stack.ensure(current)
            ours.expect(f"rolling: add {new.external_key}", added, lambda r: r.summary.add == 1)
            current.remove(old)
            removed = stack.ensure(current)
            ours.expect(f"rolling: remove {old.external_key}", removed, _one_deleted)

    label = f"N={n} rep {rep} ours rolling revision change"
    _, usage = progress.measure(label, roll, events.status)
    stack.destroy()
    bench.settle(namespace, 0, progress.say)
    return usage


def _one_deleted(result: StackResult) -> bool:
    return result.summary.destroy == 1 and result.summary.add == 0


def _floor(bench: Workbench, progress: Progress, n: int, rep: int) -> Usage:
    settings = bench.namespace(f"bench-{n}-rolling-floor")
    desired = scenario.intents(n)
    with bench.provider_cluster() as cluster:
        floor.apply_all(cluster, settings, desired)
        bench.settle(settings.namespace, n, progress.say)

        def roll() -> None:
            for old in desired[: rolled(n)]:
                floor.apply_all(cluster, settings, [scenario.next_revision(old)])
                _delete(cluster, settings, old)

        label = f"N={n} rep {rep} floor rolling revision change"
        _, usage = progress.measure(label, roll)
        done = desired[: rolled(n)]
        floor.delete_all(
            cluster, settings, [*map(scenario.next_revision, done), *desired[rolled(n) :]]
        )
    bench.settle(settings.namespace, 0, progress.say)
    return usage


def _delete(cluster: Cluster, settings: KubernetesSettings, intent: ReplicaIntent) -> None:
    """One replica's objects deleted (Background, as ours), waiting until each is gone."""
    for obj in floor.objects(settings, [intent]):
        floor.delete(cluster, obj)
        while cluster.get(KINDS[obj["kind"]], settings.namespace, obj["metadata"]["name"]):
            time.sleep(floor.GONE_POLL_SECONDS)
