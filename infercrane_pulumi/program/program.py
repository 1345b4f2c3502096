"""The Pulumi program: one ``build_program`` for the CLI (``pulumi up``) and the Automation API.

It reads and validates the whole stack configuration first, then judges it (``Judge``): renders
its objects once, applies its policy (a mandatory rule broken refuses the run, an advisory one
is a warning) and runs the ownership preflight; only then does it register the provider and the
components, so an invalid configuration, a policy violation or a foreign object means zero
registered resources and zero writes. ``pulumi up`` runs it in a process of its own (``hand_run``:
``judged``); every driver serves it from its own process (``automation.engine``), handing it
what it judged for exactly that configuration (``served``: the objects it rendered, checked and
judged, on the API server it checked) and what it carries: a key the driver verified unchanged
and left out of a targeted run (``handoff.Carried``) is exported as the stack recorded it, not
registered. A refusal is reported twice: as the error itself to the driver that serves the
program (``report``) and as the run's error text (for people running ``pulumi up``).

Every component carries one named delete hook (``DELETE_HOOK``), so that a destroy deletes
what it forgets: run by a person, the hook deletes the key's objects by uid as the engine
deletes its component (``pulumi destroy --run-program``; without the program the engine refuses
the destroy); served by a driver, which deletes by itself, it does nothing (``forgetting``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi

from infercrane_pulumi.config import files, kubeconfigs
from infercrane_pulumi.config.files import plain_kubeconfig_problems
from infercrane_pulumi.config.intents import (
    CONFIG_NAMESPACE,
    KUBERNETES_KEY,
    STACK_KEYS,
    StackConfig,
)
from infercrane_pulumi.config.rules import parse_stack_section
from infercrane_pulumi.errors import ConfigError, DamagedStateError, InferCraneError
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.policy.rules import Finding, enforce
from infercrane_pulumi.program import handoff, records
from infercrane_pulumi.program.components import ReplicaComponent, stack_provider
from infercrane_pulumi.program.handoff import Carried

# What judges a configuration before anything is registered: the objects to register, or a
# refusal raised.
Judge = Callable[[StackConfig], "workloads.Rendered"]
Preflight = Callable[["workloads.Rendered"], None]
Report = Callable[[InferCraneError], None]
# What the engine's deletion of a key's component does to its objects: given the run's
# configuration and the component's recorded key.
OnDelete = Callable[[StackConfig, str], None]
# The one delete hook every component carries, by name: the engine records the name with the
# component and, for a destroy, refuses to run without a program that registers it
# (``pulumi destroy`` without ``--run-program`` then deletes nothing and forgets nothing).
DELETE_HOOK = "infercrane-delete-by-uid"
HOST_CONFIG_FILE_ENV = "INFERCRANE_PULUMI_CONFIG_FILE"


def config_from_pulumi(given: Iterable[str] = ()) -> StackConfig:
    """The stack's configuration as the engine handed it to the program, validated as a stack
    file is (``parse_stack_section``). ``given``: every key the engine handed, checked for
    keys the program does not read (a driver serving the program has checked its file)."""
    config = pulumi.Config(CONFIG_NAMESPACE)
    # get_object also decrypts secret values (a kubeconfig set with --secret --path).
    section: dict[str, Any] = dict.fromkeys(given)
    for field, key in STACK_KEYS.items():
        value = config.get_object(field)
        if value is not None:
            section[key] = value
        else:
            section.pop(key, None)  # missing or null: the schema says which it must not be
    # Pulumi marks the whole `infercrane:kubernetes` object secret when a value in it is.
    secret = pulumi.runtime.is_config_secret(KUBERNETES_KEY)
    plain = plain_kubeconfig_problems(section.get(KUBERNETES_KEY), secret=secret)
    try:
        parsed = parse_stack_section(section)
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
    judge: Judge,
    *,
    kubeconfig: Path | str | None,
    on_delete: OnDelete,
    carried: Carried | None = None,
    report: Report | None = None,
    given: Iterable[str] = (),
    provenance: records.Provenance | None = None,
) -> Callable[[], None]:
    """The program: ``judge`` before any registration, then its objects registered, the
    ``carried`` keys exported as recorded, and every refusal handed to ``report`` before it
    fails the run. ``given``: every configuration key the engine handed
    (``config_from_pulumi``); ``provenance``: what the driver records beside what it applies
    (the version of the desired state it read, the cluster it reached). ``kubeconfig``: the
    one its driver gives a stack that names none (``kubeconfigs.resolved``), for this run
    alone: several runs are served from one process at once. ``on_delete``: what the engine's
    deletion of a key's component does (a driver deletes by itself: nothing; a person's run:
    ``hand_run.delete_objects``)."""

    def program() -> None:
        try:
            config = kubeconfigs.for_run(config_from_pulumi(given), kubeconfig)
            rendered = judge(config)
        except InferCraneError as error:
            if report is not None:
                report(error)
            raise pulumi.RunError(describe(error)) from error
        hook = delete_hook(lambda key: on_delete(config, key))
        provider = stack_provider(config.kubernetes)
        kept = {} if carried is None else carried.records_for(config)
        replicas = {
            intent.external_key: kept[intent.external_key]
            if intent.external_key in kept
            else ReplicaComponent(
                settings=config.kubernetes,
                intent=intent,
                objects=rendered.objects[intent.external_key],
                provider=provider,
                opts=pulumi.ResourceOptions(hooks=pulumi.ResourceHookBinding(before_delete=[hook])),
            ).outputs()
            for intent in config.replicas
        }
        pulumi.export(records.NAMESPACE_OUTPUT, config.kubernetes.namespace)
        pulumi.export(records.WORKLOAD_API_OUTPUT, config.kubernetes.workload_api)
        # What was applied, but the credentials: a ``remove`` or an observation from any
        # process judges against it, never against a file's pending edits.
        pulumi.export(records.SETTINGS_OUTPUT, files.settings_record(config.kubernetes))
        pulumi.export(records.REPLICAS_OUTPUT, replicas)
        for name, value in (provenance or records.Provenance()).outputs().items():
            pulumi.export(name, value)

    return program


def delete_hook(delete: Callable[[str], None]) -> pulumi.ResourceHook:
    """The components' delete hook (``DELETE_HOOK``), handing ``delete`` the key the deleted
    component recorded."""

    def deleting(args: pulumi.ResourceHookArgs) -> None:
        intent = (args.old_outputs or {}).get("intent")
        key = intent.get("externalKey") if isinstance(intent, Mapping) else None
        if not isinstance(key, str):
            raise DamagedStateError(f"{args.urn}: its state records no external key")
        delete(key)

    return pulumi.ResourceHook(DELETE_HOOK, deleting)


def forgetting() -> None:
    """The program a driver serves to a destroy it carried out itself (each object deleted by
    its uid first: ``automation.run``): it registers nothing but the delete hook the engine
    finds in the state, which then has nothing to delete."""
    delete_hook(lambda _key: None)


def judged(preflight: Preflight) -> Judge:
    """A configuration judged here, as a program run by hand judges it: its objects rendered
    for this stack, its policy (an advisory finding is a warning), then ``preflight``."""

    def judge(config: StackConfig) -> workloads.Rendered:
        rendered = workloads.render(config, stack=stack_identity())
        warn(enforce(rendered))
        preflight(rendered)
        return rendered

    return judge


def served(
    checked: handoff.Checked,
    rendered: workloads.Rendered,
    findings: Sequence[Finding],
    preflight: Preflight,
) -> Judge:
    """What the driver serving the program judged: its ``rendered`` objects, for exactly the
    configuration it ``checked``, on the API server it checked, and its advisory policy
    ``findings`` (warnings in the run's display, as a person's run shows them). A provider
    bound for another server is refused before anything is registered; another configuration
    (none, as the driver hands over what it checked) is judged here as a person's run is, with
    ``preflight`` (``hand_run.ownership_preflight``)."""

    def judge(config: StackConfig) -> workloads.Rendered:
        reached = kubeconfigs.identity(config.kubernetes)
        if reached != checked.cluster:
            raise ConfigError(
                f"{KUBERNETES_KEY}.kubeconfig: the provider would reach {reached}, but this "
                f"run's checks read {checked.cluster}; nothing was written"
            )
        if checked.digest != handoff.digest(config):
            return judged(preflight)(config)
        warn(findings)
        return rendered

    return judge


def load_host_config(environ: Mapping[str, str] = os.environ) -> frozenset[str]:
    """Load the configuration from the file the hermetic language host names, if it named one;
    every key the engine handed the program, either way.

    Pulumi hands a program its configuration in one environment variable, which Linux caps at
    128 KiB: a stack of ~1,000 intents would not start (pulumi/pulumi#8680). InferCrane's host
    also writes it to a private file; Pulumi's official host sets only the variable.
    """
    path = environ.get(HOST_CONFIG_FILE_ENV)
    if not path:
        return frozenset(pulumi.runtime.get_config_env())
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    pulumi.runtime.set_all_config(document["config"], document["secretKeys"])
    return frozenset(document["config"])


def warn(findings: Sequence[Finding]) -> None:
    """Advisory policy findings as the engine's warnings, for a person watching the run."""
    for finding in findings:
        pulumi.log.warn(f"[policy {finding.rule}] {finding.message}")


def stack_identity() -> str:
    return naming.stack_identity(pulumi.get_project(), pulumi.get_stack())
