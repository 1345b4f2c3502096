"""The Pulumi program: one ``build_program`` for the CLI (``pulumi up``) and the Automation API.

It reads and validates the whole stack configuration first, then applies its policy (a
mandatory rule broken refuses the run, an advisory one is a warning), then runs the ownership
preflight, and only then registers the provider and the components, so an invalid
configuration, a policy violation or a foreign object means zero registered resources and zero
writes. ``pulumi up`` runs it in a process of its own (``main``); every driver serves it from
its own process (``automation.programhost``), handing it what it checked and what it carries:
a key the driver verified unchanged and left out of a targeted run (``carried``) is exported as
the stack recorded it, not registered. A refusal is reported twice: as the error itself to the
driver that serves the program (``report``) and as the run's error text (for people running
``pulumi up``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pulumi

from infercrane_pulumi import naming, preflighted
from infercrane_pulumi.carried import Carried
from infercrane_pulumi.components import ReplicaComponent, stack_provider
from infercrane_pulumi.config_files import plain_kubeconfig_problems
from infercrane_pulumi.config_rules import parse_stack_config
from infercrane_pulumi.errors import ConfigError, InferCraneError
from infercrane_pulumi.intents import CONFIG_NAMESPACE, KUBERNETES_KEY, StackConfig
from infercrane_pulumi.policy.rules import enforce

Preflight = Callable[[StackConfig], None]
Report = Callable[[InferCraneError], None]
HOST_CONFIG_FILE_ENV = "INFERCRANE_PULUMI_CONFIG_FILE"


def config_from_pulumi() -> StackConfig:
    config = pulumi.Config(CONFIG_NAMESPACE)
    # get_object also decrypts secret values (a kubeconfig set with --secret --path).
    kubernetes = config.get_object("kubernetes")
    # Pulumi marks the whole `infercrane:kubernetes` object secret when a value in it is.
    secret = pulumi.runtime.is_config_secret(KUBERNETES_KEY)
    plain = plain_kubeconfig_problems(kubernetes, secret=secret)
    try:
        parsed = parse_stack_config(
            kubernetes, config.get_object("replicas"), config.get_object("policy")
        )
    except ConfigError as error:
        raise ConfigError(plain + list(error.problems)) from error
    if plain:
        raise ConfigError(plain)
    return parsed


def describe(error: InferCraneError) -> str:
    return f"[{error.code}] InferCrane refused to continue:" + "".join(
        f"\n  - {problem}" for problem in error.problems
    )


def build_program(
    preflight: Preflight, *, carried: Carried | None = None, report: Report | None = None
) -> Callable[[], None]:
    """The program: ``preflight`` before any registration, ``carried`` keys exported as
    recorded, and every refusal handed to ``report`` before it fails the run."""

    def program() -> None:
        try:
            config = config_from_pulumi()
            for finding in enforce(config):
                pulumi.log.warn(f"[policy {finding.rule}] {finding.message}")
            preflight(config)
        except InferCraneError as error:
            if report is not None:
                report(error)
            raise pulumi.RunError(describe(error)) from error
        provider = stack_provider(config.kubernetes)
        stack = stack_identity()
        kept = {} if carried is None else carried.records_for(config)
        replicas = {
            intent.external_key: kept[intent.external_key]
            if intent.external_key in kept
            else ReplicaComponent(
                settings=config.kubernetes, intent=intent, provider=provider, stack=stack
            ).outputs()
            for intent in config.replicas
        }
        pulumi.export("namespace", config.kubernetes.namespace)
        pulumi.export("workloadApi", config.kubernetes.workload_api)
        # What was applied, but the credentials: a ``remove`` or an observation from any
        # process judges against it, never against a file's pending edits.
        pulumi.export(naming.SETTINGS_OUTPUT, naming.settings_record(config.kubernetes))
        pulumi.export("replicas", replicas)

    return program


def load_host_config(environ: Mapping[str, str] = os.environ) -> None:
    """Load the configuration from the file the hermetic language host names, if it named one.

    Pulumi hands a program its configuration in one environment variable, which Linux caps at
    128 KiB: a stack of ~1,000 intents would not start (pulumi/pulumi#8680). InferCrane's host
    also writes it to a private file; Pulumi's official host sets only the variable.
    """
    path = environ.get(HOST_CONFIG_FILE_ENV)
    if path:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
        pulumi.runtime.set_all_config(document["config"], document["secretKeys"])


def ownership_preflight(checked: str | None = None) -> Preflight:
    """The ownership rule against the configured cluster (``cluster.ownership``), unless
    ``checked`` is the digest of exactly this configuration (``preflighted``: the driver serving
    the program ran it); an update (not a preview) also deletes what the stack no longer holds.
    A stack emptied of intents is checked too: it still deletes what it applied."""

    def preflight(config: StackConfig) -> None:
        if checked == preflighted.digest(config):
            return
        # Only here: the Kubernetes client is a second of a `pulumi up`'s start.
        from infercrane_pulumi.cluster import client, ownership

        ownership.guard(
            client.connect(config.kubernetes),
            config,
            stack=stack_identity(),
            deleting=not pulumi.runtime.is_dry_run(),
        )

    return preflight


def stack_identity() -> str:
    return naming.stack_identity(pulumi.get_project(), pulumi.get_stack())


def main() -> None:
    """The program as ``pulumi up`` runs it: preflight against the configured cluster."""
    load_host_config()
    build_program(ownership_preflight())()
