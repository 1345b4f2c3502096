"""What a run does, decided before the engine starts, over one snapshot of the namespace.

Pure but for its reads: one metadata snapshot (one paged LIST per owned kind) and the strict
server-side dry-runs of what the run applies. Over the snapshot's one verdict
(``cluster.verdict``) it decides whether the run is a verified no-op, which keys it works on
(and so whether it targets, and which verified keys the program leaves out), whether it
refreshes, and what it deletes itself (``cluster.ownership``); ``automation.run`` carries the
plan out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from infercrane_pulumi.cluster import actions, api, ownership, preflight, verdict
from infercrane_pulumi.config import files
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.program import handoff
from infercrane_pulumi.program.handoff import Carried
from infercrane_pulumi.program.records import Applied
from infercrane_pulumi.review.changes import Left

Operation = Literal["preview", "up", "destroy"]
REFRESH = "--refresh"


@dataclass(frozen=True)
class Plan:
    """What the engine is asked to do, decided before it starts."""

    flags: tuple[str, ...]  # the CLI flags decided for this run (``REFRESH``)
    # The configuration whose ownership and dry-run were checked, and the API server they were
    # checked on (``program.handoff``; None: none was, a destroy runs no program).
    checked: handoff.Checked | None = None
    unchanged: bool = False  # a verified no-op: the engine need not start
    # The keys to work on when others are verified unchanged (None: every key).
    targets: frozenset[str] | None = None
    # What the run deletes itself, each with its checked uid: a destroy before the engine
    # forgets it, an up once the engine has forgotten it.
    deletions: tuple[actions.Doomed, ...] = ()
    # The verified keys the program leaves out of a targeted run, with their recorded outputs.
    carried: Carried | None = None
    # The objects checked, which the program registers (None: a destroy registers nothing).
    rendered: workloads.Rendered | None = None
    # Per key, why the run works on it (``actions.Verdict.reasons``; none for a kept key).
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # What the run leaves of ours because its caller did not name the key (``verdict``).
    left: tuple[Left, ...] = ()


def plan_run(
    cluster: api.Cluster,
    operation: Operation,
    rendered: workloads.Rendered,
    applied: Applied,
    *,
    refresh: bool,
    exclusive: bool = True,
    verify: bool = True,
    named: frozenset[str] | None = None,
) -> Plan:
    """The decisions before the engine starts, over one snapshot of the namespace and its one
    verdict (``cluster.verdict``) on the run's objects (``rendered``, marked with the stack's
    identity). ``exclusive``: no other operation holds the stack, so a verified no-op may skip
    the engine and what the stack no longer holds may be deleted (another operation's run may
    be applying it); ``verify``: keys verified unchanged may skip the engine (not when a policy
    pack must judge every key); ``named``: the keys a ``remove`` deletes (None: an up of the
    whole desired set, a destroy: ``verdict``'s deletion rule). A destroy's ``rendered`` holds
    no object."""
    config = rendered.config
    live = preflight.snapshot(cluster, config.kubernetes)
    destroying = operation == "destroy"  # ``rendered`` holds no object: every object of ours goes
    keep = exclusive and verify and not refresh and not destroying
    judged = verdict.judge(rendered, live, applied=applied, keep=keep, named=named)
    ownership.check(cluster, judged, config.kubernetes)
    if destroying:
        deleted = tuple(judged.doomed()) if exclusive else ()
        return Plan((), deletions=deleted, reasons=judged.reasons())
    deletions = tuple(judged.doomed()) if exclusive and operation == "up" else ()
    left = tuple(
        Left(o.key, o.manifest["kind"], o.manifest["metadata"]["name"], o.reasons[0])
        for o in judged.left()
    )
    desired_keys = {intent.external_key for intent in config.replicas}
    applied_keys = {intent.external_key for intent in applied.intents}
    verified = judged.kept()
    if verified == desired_keys == applied_keys:
        # What a run that died left is deleted without the engine: the state never held it.
        return Plan((), unchanged=True, deletions=deletions, reasons=judged.reasons(), left=left)
    removed = applied_keys - desired_keys
    refreshing = refresh or bool(judged.drift)
    # A refresh drops from the state what is gone (deleted out of band): such a resource
    # cannot be targeted, so a refreshing run works on every key.
    targeted = verified and not refreshing
    # The engine keeps an untargeted resource the program does not register: a targeted run's
    # program registers only the keys it works on, unless the provider's settings changed (a
    # provider the engine replaces takes every resource under it along).
    same_provider = applied.settings is not None and files.settings_record(
        applied.settings
    ) == files.settings_record(config.kubernetes)
    left_out = sorted(verified & applied.records.keys()) if targeted and same_provider else []
    return Plan(
        (REFRESH,) * refreshing,
        checked=handoff.Checked(handoff.digest(config), cluster.identity),
        rendered=rendered,
        reasons=judged.reasons(),
        targets=frozenset((desired_keys - verified) | removed) if targeted else None,
        deletions=deletions,
        left=left,
        carried=Carried.of(config, {k: applied.records[k] for k in left_out}) if left_out else None,
    )
