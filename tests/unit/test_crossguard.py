"""The policy pack's side of the rules: objects as the engine hands them to a pack, and the
pack's own configuration (CrossGuard's, per rule)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.objects.workloads import KINDS, replica_objects
from infercrane_pulumi.policy import crossguard
from infercrane_pulumi.policy.rules import evaluate_stack
from tests.unit import samples

Resource = tuple[str, Mapping[str, Any]]


def _as_the_engine_sends(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The engine's properties reach a pack as a protobuf Struct: every number a float."""
    loaded: Mapping[str, Any] = json.loads(json.dumps(obj), parse_int=float)
    return loaded


def _registered(policy: Mapping[str, Any], replicas: list[Any], **settings: Any) -> list[Resource]:
    config = parse_stack_config(samples.kubernetes(**settings), replicas, policy)
    return [
        (KINDS[obj["kind"]].pulumi_type, _as_the_engine_sends(obj))
        for intent in config.replicas
        for obj in replica_objects(config.kubernetes, intent)
    ]


def _pack(config: Mapping[str, Mapping[str, Any]], resources: list[Resource]) -> list[Any]:
    found = [
        (rule.id, message)
        for rule in crossguard.REPLICA_RULES
        for resource_type, props in resources
        for message in crossguard.replica_findings(
            rule, config.get(rule.id, {}), resource_type, props
        )
    ]
    budget = crossguard.budget_findings(config.get("gpu-budget", {}), resources)
    return sorted(found + [("gpu-budget", message) for message in budget])


@pytest.mark.parametrize("workload_api", ["deployment", "kserve"])
def test_the_pack_names_what_the_stacks_rules_name_under_the_same_settings(
    workload_api: str,
) -> None:
    policy = {
        "allowedRegistries": ["ghcr.io/acme"],
        "gpuProducts": ["NVIDIA-A100"],
        "gpuBudget": 1,
        "podSecurity": "restricted",
        "deniedFlags": ["--trust-remote-code", "--enforce-eager"],
        "allowedSecrets": ["hf-token"],
    }
    replicas = [
        samples.replica(runtimeArgs=["--trust-remote-code"]),
        samples.replica(externalKey="w", workload=samples.workload()),
    ]
    config = parse_stack_config(samples.kubernetes(workloadApi=workload_api), replicas, policy)
    expected = sorted((f.rule, f.message) for f in evaluate_stack(config))
    # Every rule of the pack has something to say here.
    assert {rule for rule, _ in expected} == set(crossguard.SETTINGS_OF)
    pack_config = {
        rule: {name: policy[name] for name in names if name in policy}
        for rule, names in crossguard.SETTINGS_OF.items()
    }
    resources = _registered(policy, replicas, workloadApi=workload_api)
    assert _pack(pack_config, resources) == expected


def test_without_configuration_the_pack_applies_the_rules_defaults() -> None:
    resources = _registered(
        {"allowedFlags": ["--trust-remote-code"]},
        [samples.replica(runtimeArgs=["--trust-remote-code"]), samples.replica(externalKey="b")],
    )
    assert _pack({}, resources) == [
        ("runtime-flags", "dep-7-r0: --trust-remote-code is in the runtime's argv")
    ]


def test_objects_not_infercranes_are_not_judged() -> None:
    [(_, deployment), (service_type, service)] = _registered(
        {}, [samples.replica(runtimeArgs=["--trust-remote-code"])]
    )
    annotations = dict(deployment["metadata"]["annotations"])
    del annotations["infercrane.dev/external-key"]
    theirs = {**deployment, "metadata": {**deployment["metadata"], "annotations": annotations}}
    rule = next(r for r in crossguard.REPLICA_RULES if r.id == "runtime-flags")
    deployment_type = KINDS["Deployment"].pulumi_type
    assert crossguard.replica_findings(rule, {}, deployment_type, theirs) == []
    assert crossguard.replica_findings(rule, {}, service_type, service) == []
    assert crossguard.replica_findings(rule, {}, deployment_type, deployment) != []


def test_the_gpu_settings_say_where_a_pod_asks_for_gpus() -> None:
    resources = _registered({}, [samples.replica()], gpuResource="amd.com/gpu")
    assert _pack({"gpu-budget": {"gpuBudget": 0}}, resources) == []
    assert _pack({"gpu-budget": {"gpuBudget": 0, "gpuResource": "amd.com/gpu"}}, resources) == [
        ("gpu-budget", "the replicas hold 1 GPUs, over the namespace's budget of 0")
    ]


def test_a_bad_pack_configuration_names_every_problem_in_one_line_each() -> None:
    with pytest.raises(ConfigError) as refused:
        crossguard.check_config(
            {
                "all": {"enforcementLevel": "strict", "gpuBudget": 1},
                "model-name": {"modelPatterns": ["Qwen/*"]},
                "image-registry": {"allowedRegistries": ["Not A Registry"], "gpuBudget": 2},
                "gpu-budget": "advisory",
                "pod-security": {"enforcementLevel": "mandatory", "podSecurity": "strict"},
            }
        )
    assert refused.value.problems == (
        "policy pack config: all.enforcementLevel: 'strict' is not one of advisory, disabled, "
        "mandatory, remediate",
        "policy pack config: all: takes only an enforcement level",
        "policy pack config: model-name: is not a rule of the pack (all, image-registry, "
        "gpu-product, runtime-flags, pod-security, gpu-budget, secret-reference)",
        "policy pack config: image-registry.gpuBudget: is not a setting of this rule",
        "policy pack config: image-registry.allowedRegistries.0: String should match pattern "
        "'^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*$'",
        "policy pack config: pod-security.podSecurity: Input should be 'privileged', 'baseline' "
        "or 'restricted'",
    )
    assert not refused.value.retryable
    with pytest.raises(ConfigError) as refused:
        crossguard.check_config(["image-registry"])
    assert refused.value.problems == ("policy pack config: must be an object of rule names",)


def test_an_unknown_setting_of_a_rule_is_one_line() -> None:
    with pytest.raises(ConfigError) as refused:
        crossguard.check_config({"gpu-product": {"gpuProduct": ["NVIDIA-L4"]}})
    assert refused.value.problems == (
        "policy pack config: gpu-product.gpuProduct: is not a setting of this rule",
    )
