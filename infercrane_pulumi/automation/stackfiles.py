"""Stack files driven like the control plane's stacks: ``Pulumi.<stack>.yaml`` through the one run
path, in a private workspace.

The command line (and the demo, ``make preview`` and the conformance suite, which prove what
it does) runs a stack file the way ``NamespaceStack`` runs its stacks: the generated project
(``project``) in a private temporary workspace, the stack file's document copied into it (its
encryption salt and ``secure:`` values stay valid: they depend on the passphrase only), and
``run.run`` with the file's validated configuration. The file itself is never written. The
stack is the same one in the backend as the repository project's (same project name), so a
person's ``pulumi up`` and these runs share state. ``remove`` and ``inspect`` answer as
``NamespaceStack`` does, from what the stack applied (``stacks.removal``,
``stacks.observe_applied``): the file gives them its kubeconfig, never its pending edits.

A run given a ConfigMap (the runner's ``up --configmap``) applies the stack file as the API
server holds it there, read once the stack is held (``cluster.desired``), never its own copy of
it: the file (the kubelet's copy) only says where to read it and wakes the runner's loop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi.automation import project, stacks
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.planning import Operation
from infercrane_pulumi.automation.results import StackResult
from infercrane_pulumi.automation.run import DEFAULT_OPTIONS, RunOptions, run
from infercrane_pulumi.automation.state.holders import Held, exclusive
from infercrane_pulumi.cluster import client, desired, observe
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.files import (
    STACK_FILE,
    load_document,
    parse_stack_text,
    read_settled,
    stack_file,
    write_config,
)
from infercrane_pulumi.config.intents import KUBERNETES_KEY, StackConfig
from infercrane_pulumi.config.rules import parse_stack_section
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.program.records import DesiredVersion


def stack_name(path: Path) -> str:
    match = STACK_FILE.fullmatch(path.name)
    if match is None:
        raise ConfigError(f"{path}: not a stack file (Pulumi.<stack>.yaml)")
    return match["stack"]


@dataclass(frozen=True)
class _Opened:
    """A stack file's stack, opened in a private workspace."""

    stack: auto.Stack
    # The file's, validated; its kubeconfig the run's one (``kubeconfigs.for_run``): encrypted
    # contents decrypted, else the driver's as fallback.
    config: StackConfig
    document: dict[str, Any]  # the file's YAML
    copy: Path  # the file's copy, which the program reads
    held: Held | None  # the stack held for a run (None: opened for a read)
    desired: _Read | None = None  # read from a ConfigMap (None: the file is the stack file)


@dataclass(frozen=True)
class _Read:
    """The stack file as the API server held it, and whether its versions may be ordered."""

    version: DesiredVersion
    ordered: bool


def run_stack_file(
    path: Path,
    env: PulumiEnvironment,
    operation: Operation,
    *,
    options: RunOptions = DEFAULT_OPTIONS,
    remove_key: str | None = None,
    configmap: str | None = None,
    quiet: float = 0.0,
) -> StackResult:
    """Run ``operation`` on the stack ``path`` configures. With ``remove_key``: the one
    ``remove`` (``stacks.removal``), an ``up`` of what the stack applied (its intents and its
    settings) without that key; the file gives only its kubeconfig, none of its pending
    edits. With ``configmap``: the stack file that ConfigMap of the stack's namespace holds
    under the file's name, read from the API server once the stack is held, never older than
    the version the stack applied (``cluster.desired``). ``quiet``: how long the file must
    have been left alone before it is read (``config.files.read_settled``)."""
    # Held from the stack's opening (its creation, the first time; see NamespaceStack._run)
    # to the run's end, so that what it reads stays true.
    with _opened(
        path, env, held_for=options.wait_seconds, configmap=configmap, quiet=quiet
    ) as opened:
        stack = opened.stack
        if remove_key is None:
            config, applied = opened.config, stacks.applied(stack)
            if opened.desired is not None:
                desired.check_order(
                    opened.desired.version, applied.desired, ordered=opened.desired.ordered
                )
        else:
            config, applied = stacks.removal(
                stack, remove_key, opened.config.kubernetes, client.connect
            )
            _rewrite(opened, config)
        assert opened.held is not None
        version = None if opened.desired is None else opened.desired.version
        result = run(
            stack,
            env,
            operation,
            config,
            held=opened.held,
            applied=applied,
            named=None if remove_key is None else frozenset({remove_key}),
            options=options,
            desired_version=version,
        )
        return dataclasses.replace(result, desired=version)


def inspect_stack_file(
    path: Path,
    env: PulumiEnvironment,
    connect: stacks.Connect,
    keys: Sequence[str] | None = None,
) -> list[observe.ReplicaObservation]:
    """``inspect``: the stack's keys (or ``keys``) judged as ``NamespaceStack.observe`` judges
    them (``stacks.observe_applied``), against what the stack applied; the file gives the
    kubeconfig (the environment's as fallback). ``connect`` reads the cluster."""
    with _opened(path, env) as opened:
        return stacks.observe_applied(opened.stack, opened.config.kubernetes, connect, keys)


@contextlib.contextmanager
def _opened(
    path: Path,
    env: PulumiEnvironment,
    *,
    held_for: float | None = None,
    configmap: str | None = None,
    quiet: float = 0.0,
) -> Iterator[_Opened]:
    """The file validated all-or-nothing before anything runs, then its stack (opened under
    its lease, waited for up to ``held_for`` seconds, unless None: a read); with
    ``configmap``, the stack file read from it once held, validated as well. The kubeconfig is
    resolved once, last (``kubeconfigs.for_run``: its checks and its program use that one)."""
    name = stack_name(path)
    text = read_settled(path, quiet=quiet)
    config = parse_stack_text(text, source=str(path))
    with (
        contextlib.ExitStack() as entered,
        tempfile.TemporaryDirectory(prefix="infercrane-workspace-") as scratch,
    ):
        held = None if held_for is None else entered.enter_context(exclusive(env, name, held_for))
        read = None
        if configmap is not None:
            # The file's own settings say where the API server's copy is.
            reader = kubeconfigs.resolved(config.kubernetes, env.kubeconfig)
            cluster = client.connect(reader)
            found = desired.read(cluster, config.kubernetes.namespace, configmap, path.name)
            text = found.text
            config = parse_stack_text(text, source=found.version.source)
            read = _Read(found.version, desired.comparable(cluster.version()))
        document: dict[str, Any] = load_document(text)
        workspace = project.write_project(Path(scratch))
        copy = stack_file(workspace, name)
        copy.write_text(text, encoding="utf-8")
        stack = stacks.open_stack(name, project_dir=workspace, env=env)
        if isinstance(document["config"][KUBERNETES_KEY].get("kubeconfig"), dict):
            # Encrypted contents: this process reads the cluster with them too, as the
            # program will (and so the program knows its preflight has run).
            config = _with_kubeconfig(stack, document, config)
        config = kubeconfigs.for_run(config, env.kubeconfig)
        yield _Opened(stack, config, document, copy, held, read)


def _rewrite(opened: _Opened, config: StackConfig) -> None:
    """The copy holding ``config`` for the program: its settings, intents and policy, the
    file's own kubeconfig entry (encrypted contents stay encrypted)."""
    entry = opened.document["config"][KUBERNETES_KEY].get("kubeconfig")
    write_config(opened.copy, config, kubeconfig=entry)


def _with_kubeconfig(stack: auto.Stack, document: Any, config: StackConfig) -> StackConfig:
    with stacks.pulumi_errors(stack.name):
        contents = stack.get_config(f"{KUBERNETES_KEY}.kubeconfig", path=True).value
    settings = config.kubernetes.model_dump(mode="json", by_alias=True, exclude_none=True)
    return parse_stack_section(
        {**document["config"], KUBERNETES_KEY: settings | {"kubeconfig": contents}}
    )
