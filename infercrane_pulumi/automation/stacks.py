"""Stacks as the Automation API sees them: open one, read what it applied, and say what a
failure of Pulumi's own means as one of the project's typed errors. What the stack applied
answers two questions for every driver alike: what a ``remove`` runs (``removal``) and how
each key is doing (``observe_applied``).

Running an operation is not here: ``automation.run`` is the one place that does; who holds a
stack meanwhile is ``holders``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from pulumi import automation as auto

from infercrane_pulumi.automation import engine, failures, project, pulumi_versions
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.state import leasedb, recovery
from infercrane_pulumi.cluster import api, observe, preflight, verdict
from infercrane_pulumi.config.intents import KubernetesSettings, StackConfig
from infercrane_pulumi.errors import (
    ConfigError,
    DamagedStateError,
    RunFailedError,
    StackBusyError,
    UnsettledStateError,
)
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.workloads import render
from infercrane_pulumi.program import records
from infercrane_pulumi.program.records import Applied

# How a caller reads the cluster with settings it did not choose (the applied ones).
Connect = Callable[[KubernetesSettings], api.Cluster]


@contextlib.contextmanager
def pulumi_errors(stack_name: str) -> Iterator[None]:
    """Map Pulumi's own exceptions to the project's errors (an engine run's failures are the
    run path's to say: ``automation.attempt``)."""
    try:
        yield
    except (auto.errors.StackNotFoundError, auto.errors.StackAlreadyExistsError) as error:
        raise ConfigError(f"stack {stack_name}: {error.name}") from error
    except auto.errors.CommandError as error:
        if engine.busy(error):
            raise StackBusyError(f"stack {stack_name}: another operation holds its lock") from error
        said = _cli_error(error)
        raise RunFailedError(
            f"stack {stack_name}: pulumi command failed" + (f": {said}" if said else "")
        ) from error
    except (auto.errors.InvalidVersionError, FileNotFoundError) as error:
        raise ConfigError(f"Pulumi CLI: {error}") from error


def _cli_error(error: auto.errors.CommandError) -> str | None:
    """The CLI's last ``error:`` line, credentials masked, for the person reading the failure
    (what the failure means is decided by its type above, never by these words)."""
    stderr = str(error).partition("\n stderr: ")[2]
    said = [line.strip() for line in stderr.splitlines() if line.strip().startswith("error:")]
    return failures.sanitized(said[-1].removeprefix("error:").strip()) if said else None


# Beside the backend's own .pulumi directory, never in it: a reader of its locks would take it
# for one.
OPENING_LOCK = ".infercrane-opening.lock"


def open_stack(name: str, *, project_dir: Path, env: PulumiEnvironment) -> auto.Stack:
    """Create or select stack ``name`` of the project in ``project_dir`` on ``env``'s backend.
    What a dead run left on the file backend is recovered first: selecting a stack loads its
    checkpoint, which a run killed during the state write can leave unreadable."""
    if env.state_dir is not None:
        env.state_dir.mkdir(parents=True, exist_ok=True)
        recovery.recover(env, name)
    # A bad URL or password fails here, typed, in one line: the leases' database, and the
    # state's when it is PostgreSQL (the same one, unless the leases are given their own).
    state = env.state_database
    if env.lease_database is not None and env.lease_database != state:
        leasedb.probe(env.lease_database, state=False)
    if state is not None:
        leasedb.probe(state, state=True)
    # Named here, in one line: the SDK would end in a FileNotFoundError of its own.
    missing = pulumi_versions.cli_missing(env.bin_dir, os.environ.get("PATH", ""))
    if missing is not None:
        raise ConfigError(missing)
    command = None if env.bin_dir is None else auto.PulumiCommand(root=str(env.bin_dir.parent))
    options = auto.LocalWorkspaceOptions(
        work_dir=str(project_dir), env_vars=env.variables(), pulumi_command=command
    )
    with pulumi_errors(name), _opening(env.state_dir):
        try:
            return auto.create_or_select_stack(name, work_dir=str(project_dir), opts=options)
        except auto.errors.CommandError as racing:
            # Pulumi's look-then-create is not atomic: on a shared backend another replica may
            # create the stack in between (ours then fails: exists, locked, or worse). If the
            # stack exists now, it is the one we wanted.
            try:
                return auto.select_stack(name, work_dir=str(project_dir), opts=options)
            except auto.errors.StackNotFoundError:
                raise racing from None


@contextlib.contextmanager
def _opening(state_dir: Path | None) -> Iterator[None]:
    """On the file backend, one process at a time opens a stack of the directory: two that
    create one stack at once both fail, one as if it were busy, the other with a missing lock
    blob (the property test of the desired state's versions found both). A shared backend
    opens its stacks under their lease already (``holders.exclusive``)."""
    if state_dir is None:
        yield
        return
    with (state_dir / OPENING_LOCK).open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes
        yield


def applied(stack: auto.Stack) -> Applied:
    """What the stack's last successful run applied (its outputs, in the backend): each key's
    intent and its objects' uid and generation, and the settings it applied them with.

    One read of one state version: of the checkpoint file itself on a local directory
    (``engine.checkpoints``: no CLI process), else one CLI read, because the SDK's ``Stack.outputs``
    reads the outputs twice (plain, then with secrets) and a run of another process landing
    between the two reads breaks it. Our outputs hold no secret, so one read says it all.
    Outputs that are not the shape the program writes are ``DamagedStateError``, never a
    traceback.
    """
    workspace = stack.workspace
    # The backend the CLI would read: the one its environment names.
    backend = workspace.env_vars.get("PULUMI_BACKEND_URL")
    read = engine.checkpoint_outputs(backend, project.PROJECT_NAME, stack.name)
    printed: str | None = None
    if read is None:
        with pulumi_errors(stack.name):
            printed = workspace.pulumi_command.run(
                ["stack", "output", "--json", "--show-secrets", "--stack", stack.name],
                workspace.work_dir,
                workspace.env_vars,
            ).stdout
    try:
        return records.from_outputs(
            (read if printed is None else json.loads(printed or "{}")) or {}
        )
    except (ValueError, AttributeError, KeyError, TypeError) as error:
        # ValidationError is a ValueError; the others are a shape we never wrote.
        raise DamagedStateError(
            f"stack {stack.name}: its outputs are not what InferCrane writes "
            f"({type(error).__name__}); restore the state from a backup or export"
        ) from None


def removal(
    stack: auto.Stack, external_key: str, settings: KubernetesSettings, connect: Connect
) -> tuple[StackConfig, Applied]:
    """The one ``remove`` (the command line's and ``NamespaceStack``'s): what an ``up`` runs to
    delete one key's objects and keep every other key exactly as the stack applied it, and what
    the stack applied (for ``run.run``). Hold the stack exclusively from here to the run's end.

    The applied settings come from the stack's outputs, where the program records them at
    every run (``config.files.settings_record``: all but the kubeconfig, so ``settings``' kubeconfig
    is used). ``settings`` (a stack file's, a control plane's) are never applied otherwise: their
    pending edits, like pending intents, wait for the next ``up``. Outputs written before the
    settings were recorded run under ``settings`` only when every kept key is verified against
    the cluster to be as those settings would apply it (kept by ``cluster.verdict``); otherwise a
    ``ConfigError`` says to run ``up`` first, which records them. Absent ``external_key``: a
    run of what the stack applied, which changes nothing. A state holding replicas its outputs
    do not record (a run that failed or was stopped midway) is refused before anything runs
    (``UnsettledStateError``): what the stack applied is then not known, and unknown is never
    taken for "nothing else"."""
    found = applied(stack)
    _settled(stack, found)
    kept = dataclasses.replace(
        found, intents=tuple(i for i in found.intents if i.external_key != external_key)
    )
    config = kept.config(settings)
    if found.settings is None and kept.intents:
        live = preflight.snapshot(connect(config.kubernetes), config.kubernetes)
        verified = verdict.judge(render(config, stack=None), live, applied=found).kept()
        unproven = sorted(i.external_key for i in kept.intents if i.external_key not in verified)
        if unproven:
            raise ConfigError(
                f"stack {stack.name}: its state does not record the settings it applied, and "
                f"the objects of {', '.join(unproven)} are not as the given settings would "
                "apply them; run `up` once (it records them), then remove"
            )
    return config, found


def _settled(stack: auto.Stack, found: Applied) -> None:
    """Refuse a state whose replicas are not all recorded by its outputs (``found``): read as
    the CLI exports it, the public form of every backend."""
    with pulumi_errors(stack.name):
        deployment = stack.export_stack().deployment or {}  # a new stack exports none
    held = engine.state_components(deployment, naming.REPLICA_TYPE)
    if held is None:
        raise DamagedStateError(
            f"stack {stack.name}: its state is not a deployment InferCrane reads; restore the "
            "state from a backup or export"
        )
    unrecorded = sorted(held - {naming.object_name(i.external_key) for i in found.intents})
    if unrecorded:
        raise UnsettledStateError(
            f"stack {stack.name}: its state holds {len(unrecorded)} replica(s) its last "
            f"successful run did not record ({', '.join(unrecorded[:3])}"
            f"{', ...' if len(unrecorded) > 3 else ''}: a run failed or was stopped midway); "
            "ensure the desired set first (it settles the state), then remove"
        )


def observe_applied(
    stack: auto.Stack,
    settings: KubernetesSettings,
    connect: Connect,
    keys: Sequence[str] | None = None,
) -> list[observe.ReplicaObservation]:
    """The one observation rule (``inspect`` and ``NamespaceStack.observe``): every key the
    stack applied (or just ``keys``; in the outputs' order, which is by key) judged against
    what it applied, its intents under its recorded settings (``Applied.config``:
    ``settings`` give the kubeconfig, and everything when the outputs predate the record),
    then exactly-ours objects of keys it does not hold, ``orphaned``. A stack file's or a
    caller's pending changes are not applied, so they count for nothing: a key only they add
    is not in the stack, one only they drop still is."""
    config = applied(stack).config(settings)
    return observe.observe(connect(config.kubernetes), config, keys)
