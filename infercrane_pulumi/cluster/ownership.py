"""The one ownership rule of a run, on every path: may this run apply and delete what it would?

A driver on the run path (``automation.run``) and the program a person runs with ``pulumi up``
both come here, over one metadata snapshot of the namespace: every object the run applies must
be ours (and free of take-over managers) and pass the strict server-side dry-run; every object
a removed key of the stack's record left at our names must be exactly ours; and the run deletes
exactly this stack's objects whose key is no longer desired (``deletion.leftovers``), each by
the uid just read. The driver knows what the stack recorded (its outputs); a program run by
hand does not, so it passes nothing and relies on the stack identity every object carries: a
removed key's object that is not exactly ours is then neither refused nor deleted, and the
engine only forgets it (objects are registered with ``retainOnDelete``).
"""

from __future__ import annotations

from infercrane_pulumi import workloads
from infercrane_pulumi.cluster import deletion, preflight
from infercrane_pulumi.cluster.client import Cluster
from infercrane_pulumi.cluster.preflight import Snapshot
from infercrane_pulumi.intents import StackConfig


def check_run(
    cluster: Cluster,
    live: Snapshot,
    *,
    desired: StackConfig,
    work: StackConfig,
    stack: str,
    recorded: StackConfig | None = None,
) -> list[deletion.Doomed]:
    """Refuse (``OwnershipError``, ``RejectedError``...) a run of ``desired`` that would apply
    to or delete what is not ours, else the objects it must delete. ``work``: the part of
    ``desired`` the run applies (every key, unless some are verified unchanged); ``recorded``:
    what the stack applied last, when known; ``stack``: its identity."""
    kept = {intent.external_key for intent in desired.replicas}
    removed = tuple(
        i for i in (recorded.replicas if recorded else ()) if i.external_key not in kept
    )
    applied = workloads.stack_objects(work, stack=stack)
    gone = workloads.stack_objects(desired.model_copy(update={"replicas": removed}), stack=stack)
    preflight.check_ownership(live, applied=applied, deleted=gone)
    preflight.check_reconcilable(workloads.workload_api(desired.kubernetes), applied)
    preflight.check_dry_run(cluster, applied)
    return deletion.leftovers(
        live,
        namespace=desired.kubernetes.namespace,
        stack=stack,
        kept=kept,
        recorded={i.external_key for i in removed},
    )


def guard(cluster: Cluster, config: StackConfig, *, stack: str, deleting: bool) -> None:
    """The program's own run of the rule, when no driver ran it for exactly ``config``: check,
    then (``deleting``: an update, not a preview) delete what the stack no longer holds."""
    live = preflight.snapshot(cluster, config.kubernetes)
    doomed = check_run(cluster, live, desired=config, work=config, stack=stack)
    if deleting:
        deletion.delete_all(cluster, config.kubernetes, doomed)
