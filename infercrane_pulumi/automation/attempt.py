"""The engine attempts of a run, and one attempt: the command its plan asks for, the program
served for exactly that plan (``automation.engine``), and what the attempt's end means as one
typed error; attempts until one is not refused as busy (``attempts``).

A failed attempt is, in this order: another operation holding the stack (``StackBusyError``),
the program's own refusal (as itself: the served program hands it over), the policy pack's
mandatory findings (``PolicyViolationError``), else ``failures.failed``: the engine's error
diagnostics, or a failure to record a run whose every step went through.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from pulumi import automation as auto

from infercrane_pulumi.automation import engine, failures, policypack, project, stacks, targets
from infercrane_pulumi.automation.planning import Operation, Plan
from infercrane_pulumi.automation.policypack import PolicyPack
from infercrane_pulumi.automation.state.holders import Held
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.errors import InferCraneError, PolicyViolationError, StackBusyError
from infercrane_pulumi.hand_run import ownership_preflight
from infercrane_pulumi.policy.rules import Finding
from infercrane_pulumi.program.program import build_program, forgetting, served
from infercrane_pulumi.program.records import Provenance

# The Pulumi CLI's command per operation (refresh is decided per run). A destroy runs the
# program that registers only the components' delete hook (``program.forgetting``): the engine
# refuses a destroy of a component with delete hooks without it, and the driver has deleted
# the objects already (its ownership check ran there, and nothing is applied).
COMMANDS: Mapping[Operation, tuple[str, ...]] = {
    "preview": ("preview", "--diff"),
    "up": ("up", "--yes", "--skip-preview"),
    "destroy": ("destroy", "--yes", "--skip-preview", "--run-program"),
}


def attempt(
    stack: auto.Stack,
    operation: Operation,
    plan: Plan,
    *,
    settings: KubernetesSettings,
    pack: PolicyPack | None,
    findings: Sequence[Finding],
    on_event: engine.EventHandler,
    on_output: engine.Printer | None,
    variables: Mapping[str, str] | None = None,
    provenance: Provenance | None = None,
    deadline: float | None = None,
    tracker: engine.Tracker | None = None,
) -> None:
    """One engine run of ``plan`` (``pack``: the policy pack the engine runs; ``findings``: the
    stack's advisory policy findings as the run judged them); ``variables``: more environment
    for the CLI and its plugins (a lease's marker); ``provenance``: what the program records
    beside what it applies (``records.Provenance``); ``deadline``: when the engine is stopped
    (``time.monotonic()``); ``tracker``: who records the engines started (a lease)."""
    if operation == "up" and pack is not None:
        # A preview first, so that the pack's mandatory finding stops the run before any write
        # (an update stops only at the first object found, having written others). Its own
        # CLI run: `up` without --skip-preview truncates its event log between the two.
        attempt(
            stack,
            "preview",
            plan,
            settings=settings,
            pack=pack,
            findings=findings,
            on_event=lambda _: None,
            on_output=on_output,
            variables=variables,
            deadline=deadline,
            tracker=tracker,
        )
    refused: list[InferCraneError] = []  # the program's own refusal, as itself
    program = forgetting  # a destroy's plan judged nothing: the driver deleted by itself
    if plan.checked is not None and plan.rendered is not None:
        program = build_program(
            served(plan.checked, plan.rendered, findings, ownership_preflight),
            kubeconfig=settings.kubeconfig,
            # The run path deletes what the engine forgets, after it (``automation.run``).
            on_delete=lambda _config, _key: None,
            carried=plan.carried,
            report=refused.append,
            provenance=provenance,
        )

    def urns(keys: Iterable[str]) -> dict[str, str]:
        return targets.owners(
            project=project.PROJECT_NAME, stack=stack.name, settings=settings, keys=keys
        )

    targeted = () if plan.targets is None else urns(plan.targets)
    # The carried keys' steps are `same` by construction (untargeted, unregistered): their
    # results come from what the stack applied (``results.stack_result``), not their events.
    carried = () if plan.carried is None else urns(plan.carried.records)
    outcome = engine.operate(
        stack,
        [
            *COMMANDS[operation],
            *(() if pack is None else pack.flags()),
            *plan.flags,
            *(flag for urn in targeted for flag in ("--target", urn)),
        ],
        program,
        on_event=on_event,
        on_output=on_output,
        unread=frozenset(carried),
        variables=variables,
        deadline=deadline,
        tracker=tracker,
    )
    if not outcome.failed:
        return
    if outcome.busy:
        raise StackBusyError(f"stack {stack.name}: another operation holds its lock")
    if refused:
        raise refused[0]
    violations = [
        f.message for f in policypack.findings(outcome.policy, {}) if f.enforcement == "mandatory"
    ]
    if violations:
        raise PolicyViolationError(violations)
    raise failures.failed(
        stack.name, operation, list(outcome.diagnostics), finished=outcome.finished
    )


def attempts(
    stack: auto.Stack,
    held: Held,
    once: Callable[[], None],
    *,
    wait_seconds: float,
) -> None:
    """Engine attempts (``once``: one ``attempt`` of the run, its processes carrying the
    lease's marker) until one is not refused as busy. Without a lease: what a dead run left is
    recovered before each, and a live holder is waited for up to ``wait_seconds``
    (``Held.free``). Under the stack's lease no live replica runs the stack, so a Pulumi lock
    met that a lease holder's engine left is broken (after the lease's fence), once, and any
    other is a live writer's, never broken (``Held.break_fenced``); a run whose lease was lost
    (and was stopped) fails retryably, the one that lost it after the engine finished too (the
    retry finds the work done)."""
    lease = held.lease
    waited = time.monotonic() + wait_seconds
    broken = False
    while True:
        if lease is None:
            # Before every attempt: a holder that died while we waited left its lock, which
            # ``wait_until_free`` counts as free but the CLI still refuses.
            held.free(max(0.0, waited - time.monotonic()))
        else:
            lease.check()
        try:
            once()
        except StackBusyError:
            if lease is None and time.monotonic() < waited:
                continue  # taken between our look and our start, or its holder died
            if lease is None or broken:
                raise
            lease.fence()
            with stacks.pulumi_errors(stack.name):
                held.break_fenced(stack)
            broken = True
            continue
        except InferCraneError:
            if lease is not None:
                lease.check()  # a run that lost its lease (and was stopped) fails retryably
            raise
        if lease is not None:
            lease.check()
        return
