"""Desired state in code: one namespace's stack, driven from intents the caller holds.

The InferCrane control plane keeps its intents in its own database. ``NamespaceStack`` takes
the same typed models the stack files use, validates them all-or-nothing, writes them as the
stack's configuration through the Automation API (kubeconfig contents as a Pulumi secret) and
runs the same program ``pulumi up`` runs, through the one run path (``run.run``). Results are
per external key. Calls on one stack are serialized within this process; another process
holding the stack (its Pulumi lock, or on a shared backend its lease: ``leases``) makes a call
raise ``StackBusyError`` (retryable), at once or after ``wait_seconds``. Give each process its
own ``workspace``: the stack file lives there, the state and the lock live in the backend.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pulumi import automation as auto

from infercrane_pulumi.automation import engine, project, pulumi_versions, results, stacks
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.planning import Operation
from infercrane_pulumi.automation.policypack import PolicyPack
from infercrane_pulumi.automation.run import EventHandler, RunOptions, run
from infercrane_pulumi.automation.state.holders import Held, exclusive
from infercrane_pulumi.cluster import api, client, doctor, observe
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.files import kubeconfig_entry, stack_file, write_config
from infercrane_pulumi.config.intents import (
    KUBERNETES_KEY,
    KubernetesSettings,
    PolicySettings,
    ReplicaIntent,
    StackConfig,
)
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import InferCraneError, InternalError
from infercrane_pulumi.program.records import Applied


@dataclass
class NamespaceStack:
    settings: KubernetesSettings
    env: PulumiEnvironment
    workspace: Path
    stack_name: str = ""  # default: the namespace (one stack per namespace)
    wait_seconds: float = 0.0
    on_event: EventHandler | None = None  # the engine's events (``RunOptions.on_event``)
    # The rules every run is judged by (``infercrane:policy``; docs/how-to/policy-pack.md).
    policy: PolicySettings = field(default_factory=PolicySettings)
    # InferCrane's CrossGuard pack, run by the engine on every ensure (docs/how-to/policy-pack.md).
    policy_pack: PolicyPack | None = None
    _stack: auto.Stack | None = field(default=None, init=False, repr=False)
    _kubeconfig_digest: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.stack_name = self.stack_name or self.settings.namespace
        own = self.settings.kubeconfig
        if own is not None:  # a relative path is the caller's, anchored now (``kubeconfigs``)
            anchored = kubeconfigs.anchored(own, Path.cwd())
            self.settings = self.settings.model_copy(update={"kubeconfig": anchored})
        # No cluster to reach (no kubeconfig; ``in-cluster`` outside a Pod) is refused in one
        # line here, before any stack is opened or written; each run resolves it again.
        kubeconfigs.resolved(self.settings, self.env.kubeconfig)

    # -- operations ------------------------------------------------------------------------

    def ensure(
        self, intents: Sequence[ReplicaIntent], *, allow_empty: bool = False
    ) -> results.StackResult:
        """Make the namespace hold exactly ``intents``: create, update and delete as needed.
        No intents while the stack holds replicas is refused (``ConfigError``) unless
        ``allow_empty``: an empty desired set is a take-down only on purpose."""
        return self._run("up", self.config(intents, allow_empty=allow_empty))

    def preview(
        self, intents: Sequence[ReplicaIntent], *, allow_empty: bool = False
    ) -> results.StackResult:
        """What ``ensure(intents)`` would change; writes nothing to the cluster."""
        return self._run("preview", self.config(intents, allow_empty=allow_empty))

    def remove(self, external_key: str) -> results.StackResult:
        """Delete one key's objects and keep every other key as the stack applied it, its
        applied settings included (``stacks.removal``; no-op if absent)."""
        with self._exclusive() as held:  # no other replica's run lands between read and run
            config, applied = stacks.removal(
                self.stack(), external_key, self.settings, self._connect
            )
            # A removal only deletes, and only the key it names: what it keeps was judged when
            # it was applied.
            return self._run_held(
                held, "up", config, applied, named=frozenset({external_key}), judged=False
            )

    def destroy(self) -> results.StackResult:
        """Delete every object of the stack (the preflight still runs first)."""
        with self._exclusive() as held:
            applied = stacks.applied(self.stack())
            return self._run_held(held, "destroy", self.config(applied.intents), applied)

    def observe(self, external_key: str | None = None) -> list[observe.ReplicaObservation]:
        """The live state of every applied key (or one), read fresh from the cluster and
        judged against what the stack applied (``stacks.observe_applied``)."""
        keys = None if external_key is None else [external_key]
        return stacks.observe_applied(self.stack(), self.settings, self._connect, keys)

    def doctor(self) -> list[doctor.DoctorRow]:
        """The cluster's rows, then whether the Pulumi CLI and plugin this stack's runs would
        use are ones the program supports."""
        env = self.env
        found = pulumi_versions.installed(env.bin_dir, env.pulumi_home, os.environ.get("PATH", ""))
        cluster_rows = doctor.doctor(self._connect(self.settings), self.settings)
        return cluster_rows + pulumi_versions.rows(found)

    def applied(self) -> list[ReplicaIntent]:
        """The intents of the last successful run, from the stack's outputs in the backend."""
        return list(stacks.applied(self.stack()).intents)

    # -- plumbing ----------------------------------------------------------------------------

    def config(self, intents: Sequence[ReplicaIntent], *, allow_empty: bool = False) -> StackConfig:
        """The stack's configuration, validated as a whole before anything is written."""
        return parse_stack_config(
            self.settings.model_dump(mode="json", by_alias=True, exclude_none=True),
            [intent.model_dump(mode="json", by_alias=True) for intent in intents],
            self.policy.model_dump(mode="json", by_alias=True, exclude_none=True),
            allow_empty=allow_empty,
        )

    def stack(self) -> auto.Stack:
        if self._stack is None:
            project.write_project(self.workspace)
            self._stack = stacks.open_stack(
                self.stack_name, project_dir=self.workspace, env=self.env
            )
        return self._stack

    def _exclusive(self) -> contextlib.AbstractContextManager[Held]:
        return exclusive(self.env, self.stack_name, self.wait_seconds)

    def _connect(self, settings: KubernetesSettings) -> api.Cluster:
        return client.connect(kubeconfigs.resolved(settings, self.env.kubeconfig))

    def _write(self, stack: auto.Stack, config: StackConfig) -> None:
        """Write ``config`` into the stack file, the kubeconfig through Pulumi as a secret
        (given on stdin, never in a command line: ``engine.set_secret``).

        The intents are written as YAML directly: Pulumi's config commands take values as
        command-line arguments, and a few hundred intents exceed the kernel's 128 KiB limit
        for one argument. The encryption salt and the encrypted kubeconfig are kept.
        """
        path = stack_file(self.workspace, self.stack_name)
        digest = hashlib.sha256((config.kubernetes.kubeconfig or "").encode()).hexdigest()
        encrypted = kubeconfig_entry(path)
        kept = digest == self._kubeconfig_digest and isinstance(encrypted, dict)
        write_config(path, config, kubeconfig=encrypted if kept else None)
        if config.kubernetes.kubeconfig is not None and not kept:
            workspace = stack.workspace
            with stacks.pulumi_errors(self.stack_name):
                engine.set_secret(
                    workspace.pulumi_command,
                    stack=self.stack_name,
                    path=f"{KUBERNETES_KEY}.kubeconfig",
                    value=config.kubernetes.kubeconfig,
                    cwd=workspace.work_dir,
                    env=workspace.env_vars,
                )
        self._kubeconfig_digest = digest

    def _run(self, operation: Operation, config: StackConfig) -> results.StackResult:
        # The stack is opened (created, the first time) under its lease: Pulumi's look-then-
        # create is not atomic, and on a shared backend two replicas creating one stack at once
        # could each write it (the one busy replica now answers stack-busy before that).
        with self._exclusive() as held:
            return self._run_held(held, operation, config)

    def _run_held(
        self,
        held: Held,
        operation: Operation,
        config: StackConfig,
        applied: Applied | None = None,
        *,
        named: frozenset[str] | None = None,
        judged: bool = True,
    ) -> results.StackResult:
        options = RunOptions(
            on_event=self.on_event,
            wait_seconds=self.wait_seconds,
            policy_pack=self.policy_pack if judged else None,
        )
        stack = self.stack()
        self._write(stack, config)
        return run(
            stack,
            self.env,
            operation,
            kubeconfigs.for_run(config, self.env.kubeconfig),  # the run's one kubeconfig
            held=held,
            applied=applied,
            named=named,
            options=options,
        )


@dataclass(frozen=True)
class NamespaceOutcome:
    """One namespace of ``ensure_many``: its result, or the typed error that stopped it."""

    result: results.StackResult | None = None
    error: InferCraneError | None = None


def ensure_many(
    requests: Mapping[str, tuple[NamespaceStack, Sequence[ReplicaIntent]]], *, parallel: int = 4
) -> dict[str, NamespaceOutcome]:
    """Ensure several namespaces at once (at most ``parallel``); one failure stops no other:
    every namespace gets its outcome, a foreign exception as an ``InternalError``. Only an
    interruption (KeyboardInterrupt, SystemExit) ends the whole call."""

    def one(name: str) -> NamespaceOutcome:
        stack, intents = requests[name]
        try:
            return NamespaceOutcome(result=stack.ensure(intents))
        except InferCraneError as error:
            return NamespaceOutcome(error=error)
        except Exception as error:  # a bug in one namespace's run costs no other its outcome
            internal = InternalError.of(error, where=f"namespace {name}")
            internal.__cause__ = error  # for a caller that logs the traceback; not in the message
            return NamespaceOutcome(error=internal)

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return dict(zip(requests, pool.map(one, requests), strict=True))
