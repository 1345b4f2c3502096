"""The rule set as InferCrane's CrossGuard policy pack (``policy/``) runs it, pure.

A pack judges what the engine sees: each object a program registers, and at the end the stack's
objects together. Its settings are CrossGuard's own configuration (``--policy-pack-config``, or
a Pulumi Cloud policy group): per rule, an enforcement level and the rule's settings, named as
in ``infercrane:policy``, plus where a Pod asks for GPUs (``gpuResource``, ``gpuProductLabel``,
the namespace settings' defaults). The stack's own configuration never reaches a pack (the
engine offers it, pulumi-policy 1.21 drops it), and that is as it should be for a gate: a stack
cannot loosen the limits it is judged by. A pack sees no model name (an object carries it only
in a built-in runtime's argv), so ``model-name`` stays with the program, the run path and the
offline diff.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from infercrane_pulumi.config.intents import KubernetesSettings, PolicySettings
from infercrane_pulumi.config.validators import QualifiedName
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.workloads import WORKLOAD_APIS
from infercrane_pulumi.policy import rules

PACK_NAME = "infercrane"
REPLICA_RULES = tuple(rule for rule in rules.REPLICA_RULES if rule.id != "model-name")
RULES = (*REPLICA_RULES, rules.GPU_BUDGET)
WORKLOAD_TYPES = frozenset(api.workload_kind.pulumi_type for api in WORKLOAD_APIS.values())
# What each rule may be configured with (infercrane:policy's names); the engine itself takes
# ``enforcementLevel`` out of a rule's configuration before the pack sees it.
SETTINGS_OF: Mapping[str, frozenset[str]] = {
    "image-registry": frozenset({"allowedRegistries"}),
    "gpu-product": frozenset({"gpuProducts", "gpuProductLabel"}),
    "runtime-flags": frozenset({"deniedFlags", "allowedFlags"}),
    "pod-security": frozenset({"podSecurity"}),
    "gpu-budget": frozenset({"gpuBudget", "gpuResource"}),
    "secret-reference": frozenset({"allowedSecrets"}),
}
LEVELS = frozenset({"mandatory", "advisory", "disabled", "remediate"})


class _RuleSettings(PolicySettings):
    gpu_resource: QualifiedName = KubernetesSettings.model_fields["gpu_resource"].default
    gpu_product_label: QualifiedName = KubernetesSettings.model_fields["gpu_product_label"].default


def settings(rule: str, properties: Mapping[str, Any]) -> tuple[PolicySettings, rules.Context]:
    """What one rule's configuration means; ``ConfigError`` naming every bad setting."""
    problems = [
        f"policy pack config: {rule}.{name}: is not a setting of this rule"
        for name in properties
        if name not in SETTINGS_OF[rule]
    ]
    parsed = None
    known = {name: value for name, value in properties.items() if name in SETTINGS_OF[rule]}
    try:
        # Only the rule's own settings: an unknown one is named once, above.
        parsed = _RuleSettings.model_validate(plain(known))
    except ValidationError as error:
        problems += (
            f"policy pack config: {rule}."
            + ".".join(str(part) for part in item["loc"])
            + f": {item['msg']}"
            for item in error.errors()
        )
    if problems or parsed is None:
        raise ConfigError(problems)
    return parsed, rules.Context(parsed.gpu_resource, parsed.gpu_product_label)


def check_config(document: Any) -> None:
    """A pack configuration file as the engine reads it (version 1: each rule's name, or
    ``all``, to a level or to an object of ``enforcementLevel`` and settings): raise one
    ``ConfigError`` naming every problem, before the engine starts."""
    if not isinstance(document, Mapping):
        raise ConfigError(["policy pack config: must be an object of rule names"])
    problems: list[str] = []
    for name, value in document.items():
        if name != "all" and name not in SETTINGS_OF:
            known = ", ".join(["all", *SETTINGS_OF])
            problems.append(f"policy pack config: {name}: is not a rule of the pack ({known})")
            continue
        properties = dict(value) if isinstance(value, Mapping) else {"enforcementLevel": value}
        level = properties.pop("enforcementLevel", None)
        if level is not None and level not in LEVELS:
            problems.append(
                f"policy pack config: {name}.enforcementLevel: {level!r} is not one of "
                f"{', '.join(sorted(LEVELS))}"
            )
        if name == "all":
            if properties:
                problems.append("policy pack config: all: takes only an enforcement level")
            continue
        try:
            settings(name, properties)
        except ConfigError as error:
            problems += error.problems
    if problems:
        raise ConfigError(problems)


def replica_findings(
    rule: rules.Rule, properties: Mapping[str, Any], resource_type: str, props: Mapping[str, Any]
) -> list[str]:
    """``rule`` over one object the engine registers; nothing for an object not InferCrane's."""
    subject = _subject(resource_type, props)
    if subject is None:
        return []
    policy, context = settings(rule.id, properties)
    return list(rules.REPLICA_RULES[rule](policy, subject, context))


def budget_findings(
    properties: Mapping[str, Any], resources: Iterable[tuple[str, Mapping[str, Any]]]
) -> list[str]:
    """The GPU budget over the stack's objects, as the engine has them at the end."""
    subjects = [s for t, props in resources if (s := _subject(t, props)) is not None]
    policy, context = settings(rules.GPU_BUDGET.id, properties)
    return list(rules.over_budget(policy, subjects, context))


def _subject(resource_type: str, props: Mapping[str, Any]) -> rules.Subject | None:
    if resource_type not in WORKLOAD_TYPES:
        return None
    workload = plain(props)
    key = ((workload.get("metadata") or {}).get("annotations") or {}).get(
        naming.ANNOTATION_EXTERNAL_KEY
    )
    return None if key is None else rules.Subject(str(key), None, workload)


def plain(value: Any) -> Any:
    """The engine's properties as the rendered objects have them: mappings and lists of JSON
    values, whole numbers as ``int`` (the engine's numbers arrive as floats)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
