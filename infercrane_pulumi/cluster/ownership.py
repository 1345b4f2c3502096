"""The one ownership rule of a run, on every path: may this run apply and delete what it would?

A driver on the run path (``automation.planning``) and the program a person runs with
``pulumi up`` both come here, with the one verdict of their run (``verdict``): an object it
refuses (at our name but not exactly ours, or free of take-over managers it is not) refuses the
run; every object it applies must pass the strict server-side dry-run; and the run deletes what
the verdict deletes, each object by the uid just read. The driver knows what the stack recorded
(its outputs); a program run by hand does not, so it passes nothing and relies on the stack
identity every object carries: a removed key's object that is not exactly ours is then neither
refused nor deleted, and the engine only forgets it (objects are registered with
``retainOnDelete``). A person's ``pulumi destroy --run-program`` deletes key by key, as the engine
deletes each key's component (``delete_named``, from the program's delete hook).
"""

from __future__ import annotations

from infercrane_pulumi.cluster import actions, deletion, preflight, verdict
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.errors import ConfigError, OwnershipError
from infercrane_pulumi.objects import workloads


def check(cluster: Cluster, judged: actions.Verdict, settings: KubernetesSettings) -> None:
    """Refuse (``OwnershipError``, ``RejectedError``...) a run whose verdict refuses an object,
    or whose applied objects the API server or the workload's controller would not take, and
    (``ConfigError``) one that would empty the namespace not on purpose."""
    if judged.emptying:
        raise ConfigError(judged.emptying)
    refusals = judged.refusals()
    if refusals:
        raise OwnershipError(refusals)
    applied = judged.applied()
    preflight.check_reconcilable(workloads.workload_api(settings), applied)
    preflight.check_dry_run(cluster, applied)


def guard(cluster: Cluster, rendered: workloads.Rendered, *, deleting: bool) -> None:
    """The program's own run of the rule, when no driver ran it for exactly this configuration:
    check, then (``deleting``: an update, not a preview) delete what the stack no longer
    holds."""
    settings = rendered.config.kubernetes
    live = preflight.snapshot(cluster, settings)
    judged = verdict.judge(rendered, live, keep=False)
    check(cluster, judged, settings)
    if deleting:
        deletion.delete_all(cluster, settings, judged.doomed())


def delete_named(cluster: Cluster, emptied: workloads.Rendered, named: frozenset[str]) -> None:
    """Delete the stack's objects of the ``named`` keys, each by the uid just read, as a
    destroy names them: ``emptied`` is the stack's rendering without any intent."""
    settings = emptied.config.kubernetes
    live = preflight.snapshot(cluster, settings)
    judged = verdict.judge(emptied, live, keep=False, named=named)
    check(cluster, judged, settings)
    deletion.delete_all(cluster, settings, judged.doomed())
