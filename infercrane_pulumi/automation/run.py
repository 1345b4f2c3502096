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
has forgotten them, a destroy first, then runs the engine without the program.

The engine then runs the program served from this process (``programhost``), which hands a
refusal back as itself, with a private directory (its event log, and the run's TMPDIR, because
pulumi-kubernetes writes the whole kubeconfig to a temporary file on every configure and never
removes it). What a dead run left is recovered first; a busy stack raises
``StackBusyError`` at once or after ``wait_seconds``; a failure becomes the program's own
refusal, else the pack's mandatory findings (``PolicyViolationError``), else
``RunFailedError`` with the engine's error diagnostics (from its event stream, never its text,
credentials masked), ``BackendUnavailableError`` when the engine ran every step without an
error but could not record them, or ``ClusterUnavailableError`` when the API server cannot be
reached.

On a backend with stack leases (``leases``: PostgreSQL state, or another shared backend given
a lease database) the whole run, from reading the applied intents to the engine's end, holds
the stack's lease; a Pulumi lock found under it is stale and broken, and a run whose lease is
lost is stopped and fails retryably (``BackendUnavailableError``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi import naming
from infercrane_pulumi.automation import (
    cliprocess,
    eventlog,
    leases,
    policypack,
    programhost,
    project,
    results,
    stacks,
    targets,
)
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.planning import Operation, Plan, plan_run
from infercrane_pulumi.automation.policypack import PolicyPack
from infercrane_pulumi.automation.recovery import break_locks, recover
from infercrane_pulumi.cluster import client, deletion
from infercrane_pulumi.cluster.unchanged import Applied
from infercrane_pulumi.errors import (
    BackendUnavailableError,
    ClusterUnavailableError,
    InferCraneError,
    PolicyViolationError,
    RunFailedError,
    StackBusyError,
)
from infercrane_pulumi.intents import KubernetesSettings, StackConfig
from infercrane_pulumi.policy import rules
from infercrane_pulumi.program import build_program, ownership_preflight

Printer = cliprocess.Printer
EventHandler = Callable[[auto.EngineEvent], Any]
MAX_PROBLEMS = 10

# The Pulumi CLI's command per operation (refresh is decided per run). A destroy runs without
# the program: its ownership check ran in the driver, and nothing is applied.
_COMMANDS: Mapping[Operation, tuple[str, ...]] = {
    "preview": ("preview", "--diff"),
    "up": ("up", "--yes", "--skip-preview"),
    "destroy": ("destroy", "--yes", "--skip-preview", "--run-program=false"),
}


@dataclass(frozen=True)
class RunOptions:
    """The one set of options every driver passes."""

    # The engine's own lines, for a terminal; without it the CLI keeps no display (``cliprocess``).
    on_output: Printer | None = None
    # Every engine event, as it happens, but the `same` steps of the keys a targeted run
    # carries (verified unchanged, kept as applied; a verified no-op sends no event at all).
    on_event: EventHandler | None = None
    wait_seconds: float = 0.0  # how long a busy stack may be waited for
    refresh: bool = False  # refresh first whatever the drift probe says
    # InferCrane's CrossGuard pack, run by the engine on a preview or an up (README, "Policy").
    policy_pack: PolicyPack | None = None


DEFAULT_OPTIONS = RunOptions()


def run(
    stack: auto.Stack,
    env: PulumiEnvironment,
    operation: Operation,
    config: StackConfig,
    *,
    applied: Applied | None = None,
    options: RunOptions = DEFAULT_OPTIONS,
) -> results.StackResult:
    """Run ``operation`` on ``stack``, whose configuration is ``config``; per-key results.
    ``applied``: what the stack applied last, when the caller has just read it."""
    events: list[auto.EngineEvent] = []

    def record(event: auto.EngineEvent) -> None:
        events.append(event)
        if options.on_event is not None:
            options.on_event(event)

    if operation == "destroy":
        options = dataclasses.replace(options, policy_pack=None)  # it judges nothing
    else:
        # Before any read or write, so that a verified no-op or a killed run's leftovers never
        # go around it; the program judges again for a person's `pulumi up`.
        rules.enforce(config)
        if options.policy_pack is not None:
            options.policy_pack.check()
    cluster = client.connect(local_settings(config.kubernetes, env))
    with exclusive(env, stack.name, options.wait_seconds) as lease:
        try:
            last_run = stacks.applied(stack) if applied is None else applied
            # A verified no-op must not answer for a stack another operation is changing
            # (under a lease, none can be).
            alone = not stacks.held_elsewhere(env, stack.name)
            plan = plan_run(
                cluster,
                operation,
                config,
                last_run,
                stack=naming.stack_identity(project.PROJECT_NAME, stack.name),
                refresh=options.refresh,
                exclusive=alone,
                # A pack judges every object, unchanged or not, as CrossGuard does.
                verify=options.policy_pack is None,
            )
            if plan.unchanged:
                deletion.delete_all(cluster, config.kubernetes, plan.deletions)
                return results.with_deletions(
                    results.unchanged(operation, stack.name, config, last_run), plan.deletions
                )
            if operation == "destroy":  # the engine, without the program, then forgets them
                deletion.delete_all(cluster, config.kubernetes, plan.deletions)
            if lease is None:
                _engine(
                    stack,
                    env,
                    operation,
                    plan,
                    options,
                    settings=config.kubernetes,
                    on_event=record,
                )
            else:
                _leased_engine(
                    stack,
                    operation,
                    plan,
                    options,
                    settings=config.kubernetes,
                    on_event=record,
                    lease=lease,
                )
            if operation == "up":
                # After the engine forgot them (it never deletes: retainOnDelete), so that its
                # events report each removed key, and a refresh never drops what it must
                # forget. A run killed in between leaves them marked: the next run deletes them.
                deletion.delete_all(cluster, config.kubernetes, plan.deletions)
        except RunFailedError as error:
            try:
                cluster.version()
            except ClusterUnavailableError as unreachable:
                raise ClusterUnavailableError([*unreachable.problems, *error.problems]) from error
            raise
    carried = {} if plan.carried is None else plan.carried.records
    kept = {key: last_run.objects.get(key, ()) for key in carried}
    return results.with_deletions(
        results.stack_result(operation, stack.name, config, events, kept=kept), plan.deletions
    )


@contextlib.contextmanager
def exclusive(
    env: PulumiEnvironment, stack_name: str, wait_seconds: float
) -> Iterator[leases.Lease | None]:
    """The stack to this caller alone, so that what it reads stays true until its run ends:
    serialized within this process, and across replicas by the stack's lease when the backend
    has one (``StackBusyError`` if not had within ``wait_seconds``). Re-entrant."""
    with stacks.serialized(env, stack_name), leases.held(env, stack_name, wait_seconds) as lease:
        yield lease


def local_settings(settings: KubernetesSettings, env: PulumiEnvironment) -> KubernetesSettings:
    """Settings for this process's own reads: the environment's kubeconfig as fallback."""
    if settings.kubeconfig is not None or env.kubeconfig is None:
        return settings
    return settings.model_copy(update={"kubeconfig": str(env.kubeconfig)})


def _engine(
    stack: auto.Stack,
    env: PulumiEnvironment,
    operation: Operation,
    plan: Plan,
    options: RunOptions,
    *,
    settings: KubernetesSettings,
    on_event: EventHandler,
) -> None:
    deadline = time.monotonic() + options.wait_seconds
    while True:
        # Before every attempt: a holder that died while we waited left its lock, which
        # ``wait_until_free`` counts as free but the CLI still refuses.
        with stacks.pulumi_errors(stack.name):
            recover(stack, env)
        stacks.wait_until_free(env, stack.name, max(0.0, deadline - time.monotonic()))
        try:
            return _attempt(stack, operation, plan, options, settings=settings, on_event=on_event)
        except StackBusyError:
            # Another process took the lock between our look and our start, or died holding it.
            if time.monotonic() >= deadline:
                raise


def _leased_engine(
    stack: auto.Stack,
    operation: Operation,
    plan: Plan,
    options: RunOptions,
    *,
    settings: KubernetesSettings,
    on_event: EventHandler,
    lease: leases.Lease,
) -> None:
    """The engine under the stack's lease: no live replica runs the stack, so a Pulumi lock
    found now was left by a dead one and is broken (after the lease's fence). Every process
    of the run carries the lease's marker: if the lease is lost they are stopped, and the run
    fails retryably."""
    for last_try in (False, True):
        lease.check()
        try:
            _attempt(
                stack,
                operation,
                plan,
                options,
                settings=settings,
                on_event=on_event,
                variables=lease.variables,
            )
        except StackBusyError:
            if last_try:
                raise
            lease.fence()
            with stacks.pulumi_errors(stack.name):
                break_locks(stack, "the lock of a replica that no longer holds the lease")
            continue
        except InferCraneError:
            lease.check()  # a run that lost its lease (and was stopped) fails retryably
            raise
        # Lost while the engine ran, and the engine finished before a heartbeat saw it: the
        # run was not guarded to its end, so it fails retryably like one stopped earlier
        # (the retry finds the work done).
        lease.check()
        return


def _attempt(
    stack: auto.Stack,
    operation: Operation,
    plan: Plan,
    options: RunOptions,
    *,
    settings: KubernetesSettings,
    on_event: EventHandler,
    variables: Mapping[str, str] | None = None,
) -> None:
    """One engine run through the Pulumi CLI, the program served from this process
    (``programhost``), its events read from its event log. The CLI is called directly
    (``cliprocess``): the Automation API's ``Stack.up`` and friends read the stack's outputs
    (twice) and its history after every run, three more CLI processes this path never uses,
    and keep all the CLI prints in memory. ``variables``: more
    environment for the CLI and its plugins."""
    pack = options.policy_pack
    if operation == "up" and pack is not None:
        # A preview first, so that the pack's mandatory finding stops the run before any write
        # (an update stops only at the first object found, having written others). Its own
        # CLI run: `up` without --skip-preview truncates its event log between the two.
        _attempt(
            stack,
            "preview",
            plan,
            options,
            settings=settings,
            on_event=lambda _: None,
            variables=variables,
        )
    diagnostics: list[str] = []
    finished: list[auto.EngineEvent] = []  # the engine's summary: it ran every step
    judged: list[auto.EngineEvent] = []  # the policy pack's findings
    refused: list[InferCraneError] = []  # the program's own refusal, as itself

    def collect(event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            judged.append(event)
        diagnostic = event.diagnostic_event
        if diagnostic is not None and diagnostic.severity == "error":
            diagnostics.extend(line.strip() for line in diagnostic.message.splitlines())
        if event.summary_event is not None:
            finished.append(event)
        on_event(event)

    program = build_program(
        ownership_preflight(plan.checked), carried=plan.carried, report=refused.append
    )
    run_dir = Path(tempfile.mkdtemp(prefix="infercrane-run-"))  # 0700
    event_log = run_dir / "events.jsonl"
    workspace = stack.workspace
    environment = {
        **workspace.env_vars,
        **(variables or {}),
        "PULUMI_DEBUG_COMMANDS": "true",  # the CLI takes --event-log only with it
        "TMPDIR": str(run_dir),
    }

    def urns(keys: Iterable[str]) -> dict[str, str]:
        return targets.owners(
            project=project.PROJECT_NAME, stack=stack.name, settings=settings, keys=keys
        )

    targeted = () if plan.targets is None else urns(plan.targets)
    # The carried keys' steps are `same` by construction (untargeted, unregistered): their
    # results come from what the stack applied (``results.stack_result``), not their events.
    carried = () if plan.carried is None else urns(plan.carried.records)
    tail = eventlog.Tail(event_log, collect, unread=frozenset(carried))
    try:
        with stacks.pulumi_errors(stack.name), programhost.serving(program) as served:
            command = [
                *_COMMANDS[operation],
                *(() if pack is None else pack.flags()),
                *plan.flags,
                *(flag for urn in targeted for flag in ("--target", urn)),
                *served,
                *("--color", "never", "--event-log", str(event_log), "--stack", stack.name),
            ]
            try:
                cliprocess.run(
                    workspace.pulumi_command,
                    command,
                    workspace.work_dir,
                    environment,
                    options.on_output,
                )
            except auto.errors.CommandError as error:
                tail.close()  # every diagnostic read before deciding what failed
                if isinstance(error, auto.errors.ConcurrentUpdateError):
                    raise
                if refused:
                    raise refused[0] from error
                violations = [
                    f.message
                    for f in policypack.findings(judged, {})
                    if f.enforcement == "mandatory"
                ]
                if violations:
                    raise PolicyViolationError(violations) from error
                raise failed(stack.name, operation, diagnostics, finished=bool(finished)) from error
    finally:
        tail.close()
        shutil.rmtree(run_dir, ignore_errors=True)


def failed(
    stack_name: str, operation: str, diagnostics: list[str], *, finished: bool
) -> RunFailedError | BackendUnavailableError:
    """What a failed engine run means, from its events, never its text: an engine that ran
    every step and reported no error failed recording them in the backend (retryable: the
    retry finds its objects by their durable names); otherwise the run failed, with the
    engine's error diagnostics, each sanitized (one line, no credentials in a URL)."""
    lines = [sanitized(line) for line in dict.fromkeys(diagnostics) if line][:MAX_PROBLEMS]
    if finished and not lines:
        return BackendUnavailableError(
            f"stack {stack_name}: pulumi {operation} ran every step but could not record "
            "them in the backend; try again"
        )
    return RunFailedError(lines or [f"stack {stack_name}: pulumi {operation} failed"])


_CREDENTIALS = (
    # user:password@ in a URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@"), r"\1***@"),
    # Authorization headers and token/password/secret values
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 ***"),
    (
        re.compile(
            r"(?i)\b(token|password|passwd|secret|access[_-]?key)([\"']?\s*[:=]\s*)[^\s,;\"']+"
        ),
        r"\1\2***",
    ),
)


def sanitized(line: str) -> str:
    """A diagnostic line fit to leave the process: at most 300 characters, credentials masked."""
    for pattern, replacement in _CREDENTIALS:
        line = pattern.sub(replacement, line)
    return line[:300]
