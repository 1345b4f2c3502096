"""What a run does, decided before the engine starts, over one snapshot of the namespace.

Pure but for its reads: one metadata snapshot (one paged LIST per owned kind) and the strict
server-side dry-runs of what the run applies. It decides whether the run is a verified no-op,
which keys it works on (and so whether it targets, and which verified keys the program leaves
out), whether it refreshes, and what it deletes itself (``cluster.ownership``);
``automation.run`` carries the plan out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infercrane_pulumi import naming, preflighted
from infercrane_pulumi.carried import Carried
from infercrane_pulumi.cluster import client, deletion, drift, ownership, preflight, unchanged
from infercrane_pulumi.cluster.unchanged import Applied
from infercrane_pulumi.intents import StackConfig

Operation = Literal["preview", "up", "destroy"]
REFRESH = "--refresh"


@dataclass(frozen=True)
class Plan:
    """What the engine is asked to do, decided before it starts."""

    flags: tuple[str, ...]  # the CLI flags decided for this run (``REFRESH``)
    # The digest of the configuration whose ownership and dry-run were checked (``preflighted``;
    # None: none was, a destroy runs no program).
    checked: str | None = None
    unchanged: bool = False  # a verified no-op: the engine need not start
    # The keys to work on when others are verified unchanged (None: every key).
    targets: frozenset[str] | None = None
    # What the run deletes itself, each with its checked uid: a destroy before the engine
    # forgets it, an up once the engine has forgotten it.
    deletions: tuple[deletion.Doomed, ...] = ()
    # The verified keys the program leaves out of a targeted run, with their recorded outputs.
    carried: Carried | None = None


def plan_run(
    cluster: client.Cluster,
    operation: Operation,
    config: StackConfig,
    applied: Applied,
    *,
    stack: str,
    refresh: bool,
    exclusive: bool = True,
    verify: bool = True,
) -> Plan:
    """The decisions before the engine starts, over one snapshot of the namespace.
    ``stack``: the stack's identity (``naming.stack_identity``); ``exclusive``: no other
    operation holds the stack, so a verified no-op may skip the engine and what the stack no
    longer holds may be deleted (another operation's run may be applying it); ``verify``: keys
    verified unchanged may skip the engine (not when a policy pack must judge every key)."""
    last = config.model_copy(update={"replicas": applied.intents})
    live = preflight.snapshot(cluster, config.kubernetes)
    if operation == "destroy":
        nothing = config.model_copy(update={"replicas": ()})
        doomed = ownership.check_run(
            cluster, live, desired=nothing, work=nothing, stack=stack, recorded=last
        )
        return Plan((), deletions=tuple(doomed) if exclusive else ())
    desired_keys = {intent.external_key for intent in config.replicas}
    verified = (
        unchanged.verified_keys(config, applied, live, stack=stack)
        if exclusive and verify and not refresh
        else set()
    )
    # Only what is not verified unchanged is checked and worked on.
    work = config.model_copy(
        update={"replicas": tuple(i for i in config.replicas if i.external_key not in verified)}
    )
    doomed = ownership.check_run(
        cluster, live, desired=config, work=work, stack=stack, recorded=last
    )
    deletions = tuple(doomed) if exclusive and operation == "up" else ()
    if verified == desired_keys == {i.external_key for i in last.replicas}:
        # What a run that died left is deleted without the engine: the state never held it.
        return Plan((), unchanged=True, deletions=deletions)
    removed = {i.external_key for i in last.replicas} - desired_keys
    refreshing = refresh or bool(drift.drift(last, live))
    # A refresh drops from the state what is gone (deleted out of band): such a resource
    # cannot be targeted, so a refreshing run works on every key.
    targeted = verified and not refreshing
    # The engine keeps an untargeted resource the program does not register: a targeted run's
    # program registers only the keys it works on, unless the provider's settings changed (a
    # provider the engine replaces takes every resource under it along).
    same_provider = applied.settings is not None and naming.settings_record(
        applied.settings
    ) == naming.settings_record(config.kubernetes)
    left_out = sorted(verified & applied.records.keys()) if targeted and same_provider else []
    return Plan(
        (REFRESH,) * refreshing,
        checked=preflighted.digest(config),
        targets=frozenset({*(i.external_key for i in work.replicas), *removed})
        if targeted
        else None,
        deletions=deletions,
        carried=Carried.of(config, {k: applied.records[k] for k in left_out}) if left_out else None,
    )
