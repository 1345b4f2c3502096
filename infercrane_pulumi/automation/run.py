"""How a run runs: the one function every driver calls to preview, apply or destroy a stack.

The CLI, ``NamespaceStack``, ``ensure_many``, ``make demo``, ``make preview``, the conformance
suite and the benchmarks all come here (``tests/unit/test_layers.py`` holds every other module
to it); only a person running ``pulumi up`` on the repository's project goes around it.

First the stack's policy: a mandatory rule broken refuses the run before anything is read or
written (``policy.rules``); a run given InferCrane's policy pack checks the pack too
(``policypack``), and every key then goes to the engine, which runs the pack (an up previews
first, so that the pack's mandatory finding stops it before any write). Before the engine
starts, ``planning`` decides over one snapshot of the namespace: a verified no-op (the engine
does not start), the keys worked on, a refresh when the cluster drifted, the ownership rule and
the strict dry-run of what is applied, and what the run deletes itself, each object by the uid
just checked (``cluster.ownership``, ``cluster.deletion``): an ``up`` deletes once the engine
has forgotten them, a destroy first, then runs the engine with a program that registers nothing
but the components' delete hook (``program.forgetting``).

Then the engine, one attempt at a time in one retry loop (``attempt.attempts``: the program
served from this process through the one door to the engine, ``automation.engine``): what a
dead run left is recovered first; a busy stack raises ``StackBusyError`` at once or after
``wait_seconds``; an attempt's failure is its typed error (``attempt``), or
``ClusterUnavailableError`` when the API server cannot be reached.

On a backend with stack leases (``leases``: PostgreSQL state, or another shared backend given
a lease database) the whole run, from reading the applied intents to the engine's end, holds
the stack's lease; a Pulumi lock found under it that a lease holder's engine left is broken,
any other is a live writer's and makes the stack busy, and a run whose lease is lost is
stopped and fails retryably (``BackendUnavailableError``).

Last, once an update or a destroy succeeded and its deletions are done, and while the stack is
still held, the stack's history is pruned to the environment's retention (``retention``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

from pulumi import automation as auto

from infercrane_pulumi.automation import engine, project, pulumi_versions, results, stacks
from infercrane_pulumi.automation.attempt import attempt, attempts
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.planning import Operation, plan_run
from infercrane_pulumi.automation.policypack import PolicyPack
from infercrane_pulumi.automation.state.holders import Held
from infercrane_pulumi.cluster import client, deletion, placement
from infercrane_pulumi.config.intents import PolicySettings, StackConfig
from infercrane_pulumi.errors import (
    ClusterUnavailableError,
    ConfigError,
    RunFailedError,
)
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.policy import rules
from infercrane_pulumi.policy.rules import Finding
from infercrane_pulumi.program.records import Applied, DesiredVersion, Provenance

Printer = engine.Printer
EventHandler = engine.EventHandler


@dataclass(frozen=True)
class RunOptions:
    """The one set of options every driver passes."""

    # The engine's own lines, for a terminal; without it the CLI keeps no display.
    on_output: Printer | None = None
    # Every engine event, as it happens, but the `same` steps of the keys a targeted run
    # carries (verified unchanged, kept as applied; a verified no-op sends no event at all).
    on_event: EventHandler | None = None
    wait_seconds: float = 0.0  # how long a busy stack may be waited for
    refresh: bool = False  # refresh first whatever the drift probe says
    # InferCrane's CrossGuard pack, run by the engine on a preview or an up
    # (docs/how-to/policy-pack.md).
    policy_pack: PolicyPack | None = None
    # The platform's policy (``--policy``), which the stack's own ``infercrane:policy`` may only
    # tighten (``policy.rules.judging``); None: the stack's policy alone.
    platform_policy: PolicySettings | None = None
    # How long the run may take from its start; past it the engine is stopped and the run
    # fails retryably (``RunTimeoutError``). None: no deadline.
    timeout_seconds: float | None = None


DEFAULT_OPTIONS = RunOptions()


def run(
    stack: auto.Stack,
    env: PulumiEnvironment,
    operation: Operation,
    config: StackConfig,
    *,
    held: Held,
    applied: Applied | None = None,
    named: frozenset[str] | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
    desired_version: DesiredVersion | None = None,
) -> results.StackResult:
    """Run ``operation`` on ``stack``, whose configuration is ``config``, while its caller
    holds it (``held``, from ``holders.exclusive``, taken once per run); per-key results.
    ``config``'s kubeconfig is the run's one, resolved by the caller once per run
    (``kubeconfigs.for_run``), for its checks and its program alike.
    ``applied``: what the stack applied last, when the caller has just read it; ``named``: the
    keys a ``remove`` deletes (None: ``config`` is the whole desired set, or a destroy: the
    deletion rule of ``cluster.verdict``); ``desired_version``: the version of the desired state
    ``config`` was read from (``cluster.desired``), recorded with what the run applies."""
    lease = held.lease
    events: list[auto.EngineEvent] = []
    deadline = None if (limit := options.timeout_seconds) is None else time.monotonic() + limit

    def record(event: auto.EngineEvent) -> None:
        events.append(event)
        if options.on_event is not None:
            options.on_event(event)

    # Rendered once: the policy, the verdict over the cluster and the program all take these
    # (a destroy's desire is no object at all, on purpose).
    desired = (
        config
        if operation != "destroy"
        else config.model_copy(update={"replicas": (), "allow_empty": True})
    )
    rendered = workloads.render(
        desired, stack=naming.stack_identity(project.PROJECT_NAME, stack.name)
    )
    findings: tuple[Finding, ...] = ()
    # Where an update's history is pruned, known before anything is written: a backend this
    # cannot prune is refused here.
    store = held.history() if operation != "preview" else None
    if operation == "destroy":
        options = dataclasses.replace(options, policy_pack=None)  # it judges nothing
    else:
        # Before any read or write, so that a verified no-op or a killed run's leftovers never
        # go around it; the served program takes the judgement as made here.
        # A removal (``named``) only deletes: what it keeps was judged when it was applied.
        platform = None if named is not None else options.platform_policy
        findings = rules.enforce(rendered, platform)
        if options.policy_pack is not None:
            options.policy_pack.check()
    cluster = client.connect(config.kubernetes)
    try:
        last_run = stacks.applied(stack) if applied is None else applied
        # Before anything is judged or written: the cluster the stack applied to, or none yet.
        where = placement.reached(cluster, config.kubernetes.namespace)
        placement.check(stack.name, last_run.cluster, where)
        plan = plan_run(
            cluster,
            operation,
            rendered,
            last_run,
            refresh=options.refresh,
            # A verified no-op must not answer for a stack another operation is changing
            # (under a lease, none can be).
            exclusive=held.alone(),
            # A pack judges every object, unchanged or not, as CrossGuard does.
            verify=options.policy_pack is None,
            named=named,
        )
        # The engine never deletes (retainOnDelete): the run deletes the plan's objects itself.
        # An up after the engine forgot them, so that its events report each removed key and a
        # refresh never drops what it must forget (a run killed in between leaves them marked:
        # the next run deletes them); a destroy before its engine forgets them
        # (``program.forgetting``); a verified no-op without the engine.
        engine_first = operation == "up" and not plan.unchanged
        # The plugin the engine needs, before anything is written (a no-op starts no engine).
        if not plan.unchanged and not pulumi_versions.plugin_binary(env.pulumi_home).is_file():
            raise ConfigError(pulumi_versions.plugin_missing(env.pulumi_home))
        if not engine_first:
            deletion.delete_all(cluster, config.kubernetes, plan.deletions)
        if not plan.unchanged:
            attempts(
                stack,
                held,
                lambda: attempt(
                    stack,
                    operation,
                    plan,
                    settings=config.kubernetes,
                    pack=options.policy_pack,
                    findings=findings,
                    on_event=record,
                    on_output=options.on_output,
                    variables={
                        **engine.memory_limit(_held(rendered, last_run), os.environ),
                        **({} if lease is None else lease.variables),
                    },
                    provenance=Provenance(desired_version, where),
                    deadline=deadline,
                    tracker=lease,
                ),
                wait_seconds=options.wait_seconds,
            )
            if engine_first:
                deletion.delete_all(cluster, config.kubernetes, plan.deletions)
            if store is not None:
                # The update succeeded and the caller still holds the stack; last, so that a
                # store failing here leaves nothing of the run undone.
                held.prune(store)
    except RunFailedError as error:
        try:
            cluster.version()
        except ClusterUnavailableError as unreachable:
            raise ClusterUnavailableError([*unreachable.problems, *error.problems]) from error
        raise
    if plan.unchanged:
        found = results.unchanged(operation, stack.name, rendered, last_run, findings)
    else:
        carried = {} if plan.carried is None else plan.carried.records
        kept = {key: last_run.objects.get(key, ()) for key in carried}
        # A destroy's result holds what it deleted, never its keys as they were.
        found = results.stack_result(
            operation, stack.name, rendered, events, findings=findings, kept=kept
        )
    # What the plan decided besides the engine: what the run deleted itself, why it worked on
    # each key, and what it left.
    return results.completed(found, plan.deletions, plan.reasons, plan.left)


def _held(rendered: workloads.Rendered, applied: Applied) -> int:
    """How many resources the engine's state holds while the run works: the stack, its
    provider, and each key's component and objects, whether the run keeps, changes or
    deletes it (what the CLI's heap grows with, ``engine.memory``)."""
    objects = {key: len(found) for key, found in applied.objects.items()}
    objects.update((key, len(found)) for key, found in rendered.objects.items())
    return 2 + sum(1 + count for count in objects.values())
