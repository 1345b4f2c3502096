"""``Replica`` as the component package constructs it for a program in any Pulumi language: the
same component, objects and checks as InferCrane's own program, one component at a time.

Its inputs are validated as a stack file is (a namespace's settings and one intent); its objects
are rendered for the calling stack, judged by the policy and the ownership rule (a strict
server-side dry-run, a look-alike refused) before anything is registered; they are registered
with ``retainOnDelete`` under a provider of the component's own, and one ``Ownership`` resource
(``removal``) deletes them, each exactly ours and by uid, when the component goes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.provider import ConstructResult

from infercrane_pulumi.cluster import client, ownership
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.files import plain_kubeconfig_problems
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.hand_run import unforced
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.package import removal
from infercrane_pulumi.package.schema import SETTINGS_INPUT
from infercrane_pulumi.program.components import ReplicaComponent, stack_provider
from infercrane_pulumi.program.program import judged


def construct(
    name: str, inputs: Mapping[str, Any], options: pulumi.ResourceOptions | None
) -> ConstructResult:
    """The component ``name`` of the calling program, from its ``inputs``; any refusal is
    raised (an ``InferCraneError``) before anything is registered."""
    given = config_of(inputs)
    rendered = judged(preflight)(kubeconfigs.for_run(given, None))
    settings = rendered.config.kubernetes
    (intent,) = given.replicas
    component = ReplicaComponent(
        settings=settings,
        intent=intent,
        objects=rendered.objects[intent.external_key],
        provider=stack_provider(settings, name=f"{name}-kubernetes"),
        opts=options,
        name=name,
    )
    assert rendered.stack is not None, "rendered for the calling stack"
    removal.Ownership(
        f"{name}-ownership",
        # The settings as given: resolved again when deleting (an in-cluster context's
        # kubeconfig is the Pod's own, never held).
        removal.held(given.kubernetes, intent.external_key, stack=rendered.stack),
        pulumi.ResourceOptions(parent=component, depends_on=component.children),
    )
    return ConstructResult(
        urn=component.urn,
        state={"resourceId": component.resource_id, "endpoint": component.endpoint},
    )


def config_of(inputs: Mapping[str, Any]) -> StackConfig:
    """The component's inputs as a stack of one intent, validated as a stack file is (its
    kubeconfig not yet resolved: ``kubeconfigs.for_run``). Every value must be known when the
    component is constructed: the checks run before anything is registered, so nothing may
    wait for another resource's output."""
    waiting = sorted(name for name, value in inputs.items() if _holds_output(value))
    if waiting:
        raise ConfigError(
            f"{', '.join(waiting)}: must be plain values, known before the component is "
            "constructed (not another resource's output, nor a secret: give the kubeconfig "
            "as a path)"
        )
    settings = inputs.get(SETTINGS_INPUT)
    intent = {name: value for name, value in inputs.items() if name != SETTINGS_INPUT}
    plain = plain_kubeconfig_problems(settings, secret=False)
    if plain:
        raise ConfigError(plain)
    return parse_stack_config(settings, [intent])


def preflight(rendered: workloads.Rendered) -> None:
    """The ownership rule over this component's objects; it deletes nothing (the stack's
    other components are not this construct's to judge: each deletes its own on removal)."""
    unforced(os.environ)
    settings = rendered.config.kubernetes
    ownership.guard(client.connect(settings), rendered, deleting=False)


def _holds_output(value: Any) -> bool:
    if isinstance(value, pulumi.Output):
        return True
    if isinstance(value, Mapping):
        return any(_holds_output(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_output(item) for item in value)
    return False
