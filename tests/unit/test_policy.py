"""The policy rules over the objects a stack renders, and the policy configuration's validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

from infercrane_pulumi.config.files import load_policy_file
from infercrane_pulumi.config.intents import PolicySettings, RuleId
from infercrane_pulumi.config.rules import parse_policy, parse_stack_config
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.objects.workloads import render
from infercrane_pulumi.policy import podsecurity
from infercrane_pulumi.policy.rules import (
    RULES,
    RUNNER_SECRETS,
    Finding,
    evaluate_rendered,
    evaluate_stack,
    registry_path,
    secret_names,
)
from tests.unit import samples

ROOT = Path(__file__).resolve().parents[2]


def _findings(
    policy: dict[str, Any], replicas: list[dict[str, Any]], **settings: Any
) -> list[Finding]:
    config = parse_stack_config(samples.kubernetes(**settings), replicas, policy)
    return list(evaluate_stack(config))


def test_every_rule_has_an_id_the_configuration_knows_and_a_row_in_the_policy_docs() -> None:
    assert sorted(rule.id for rule in RULES) == sorted(get_args(RuleId))
    rows = (ROOT / "docs" / "how-to" / "policy-pack.md").read_text(encoding="utf-8").splitlines()
    for rule in RULES:
        [row] = [row for row in rows if row.startswith(f"| `{rule.id}` |")]
        assert row.startswith(f"| `{rule.id}` | {rule.description} |")
        assert row.endswith(f"| {rule.default} |")


def test_the_defaults_pass_what_infercrane_renders_for_both_workload_apis() -> None:
    replicas = [samples.replica(), samples.replica(externalKey="w", workload=samples.workload())]
    assert _findings({}, replicas) == []
    assert _findings({}, replicas, workloadApi="kserve") == []


@pytest.mark.parametrize(
    ("flag", "denied"),
    [
        ("--trust-remote-code", "--trust-remote-code"),
        ("--api-key=sk-abc", "--api-key"),
        ("--api-key", "--api-key"),
        # As the runtime's parser reads them (they passed once): '_' for '-', an abbreviation.
        ("--trust_remote_code", "--trust-remote-code"),
        ("--api_key=sk-abc", "--api-key"),
        ("--trust-remote", "--trust-remote-code"),
    ],
)
def test_denied_flags_in_argv_are_mandatory_violations_that_never_echo_a_value(
    flag: str, denied: str
) -> None:
    assert _findings({}, [samples.replica(runtimeArgs=["--max-model-len", "8192", flag])]) == [
        Finding(
            "runtime-flags", "mandatory", "dep-7-r0", f"dep-7-r0: {denied} is in the runtime's argv"
        )
    ]


def test_a_namespace_may_allow_a_denied_flag_and_deny_its_own() -> None:
    policy = {
        "allowedFlags": ["--trust-remote-code"],
        "deniedFlags": ["--trust-remote-code", "--enforce-eager"],
    }
    custom = samples.workload(command=["python", "-m", "sglang.launch_server", "--enforce-eager"])
    assert _findings(policy, [samples.replica(runtimeArgs=["--trust-remote-code"])]) == []
    assert _findings(policy, [samples.replica(workload=custom)]) == [
        Finding(
            "runtime-flags",
            "mandatory",
            "dep-7-r0",
            "dep-7-r0: --enforce-eager is in the runtime's argv",
        )
    ]


def test_images_only_from_allowed_registries_by_host_or_path_prefix() -> None:
    policy = {"allowedRegistries": ["registry.example/vllm", "ghcr.io"]}
    replicas = [samples.replica(), samples.replica(externalKey="w", workload=samples.workload())]
    assert _findings(policy, replicas) == [
        Finding(
            "image-registry",
            "mandatory",
            "w",
            f"w: image {samples.WORKLOAD_IMAGE} is not from an allowed registry "
            "(registry.example/vllm, ghcr.io)",
        )
    ]


@pytest.mark.parametrize(
    ("image", "path"),
    [
        ("vllm/vllm-openai@sha256:ab", "docker.io/vllm/vllm-openai"),
        ("busybox:1.36", "docker.io/library/busybox"),
        ("localhost:5000/a/b:v1@sha256:ab", "localhost:5000/a/b"),
        ("registry.example/vllm/vllm-openai:v0.11@sha256:ab", "registry.example/vllm/vllm-openai"),
    ],
)
def test_registry_path_is_where_the_image_is_pulled_from(image: str, path: str) -> None:
    assert registry_path(image) == path


def test_gpu_products_outside_the_allowed_list_name_the_key() -> None:
    replicas = [samples.replica(), samples.replica(externalKey="l4", gpu="NVIDIA-L4")]
    assert _findings({"gpuProducts": ["NVIDIA-L4"]}, replicas) == [
        Finding(
            "gpu-product",
            "mandatory",
            "dep-7-r0",
            "dep-7-r0: GPU product NVIDIA-L40S is not allowed here (allowed: NVIDIA-L4)",
        )
    ]


@pytest.mark.parametrize("workload_api", ["deployment", "kserve"])
def test_the_gpu_budget_counts_every_replica_of_the_stack(workload_api: str) -> None:
    replicas = [samples.replica(externalKey=f"k{i}") for i in range(3)]
    assert _findings({"gpuBudget": 3}, replicas, workloadApi=workload_api) == []
    assert _findings({"gpuBudget": 2}, replicas, workloadApi=workload_api) == [
        Finding(
            "gpu-budget",
            "mandatory",
            None,
            "the replicas hold 3 GPUs, over the namespace's budget of 2",
        )
    ]


def test_restricted_pod_security_needs_the_hardening_settings() -> None:
    expected = [
        Finding(
            "pod-security",
            "mandatory",
            "dep-7-r0",
            "dep-7-r0: the Pod does not meet Pod Security 'restricted': container runtime may "
            "run as root (set runAsNonRoot or a non-zero runAsUser)",
        )
    ]
    policy = {"podSecurity": "restricted"}
    assert _findings(policy, [samples.replica()]) == expected
    config = parse_stack_config(samples.every_setting(), [samples.replica()], policy)
    assert evaluate_stack(config) == ()


def test_model_patterns_are_advisory_by_default_and_enforcement_is_per_rule() -> None:
    replicas = [
        samples.replica(),
        samples.replica(externalKey="llama", model="meta-llama/Llama-3.1-8B"),
    ]
    advisory = Finding(
        "model-name",
        "advisory",
        "llama",
        "llama: model meta-llama/Llama-3.1-8B matches none of Qwen/*",
    )
    assert _findings({"modelPatterns": ["Qwen/*"]}, replicas) == [advisory]
    mandatory = {"modelPatterns": ["Qwen/*"], "enforcement": {"model-name": "mandatory"}}
    assert _findings(mandatory, replicas) == [
        Finding("model-name", "mandatory", "llama", advisory.message)
    ]
    off = {"enforcement": {"runtime-flags": "disabled"}}
    assert _findings(off, [samples.replica(runtimeArgs=["--trust-remote-code"])]) == []


def test_findings_come_per_key_in_key_order_then_the_stack() -> None:
    replicas = [
        samples.replica(externalKey="b", runtimeArgs=["--trust-remote-code"]),
        samples.replica(externalKey="a", gpu="NVIDIA-H100"),
    ]
    found = _findings({"gpuProducts": ["NVIDIA-L40S"], "gpuBudget": 1}, replicas)
    assert [(f.external_key, f.rule) for f in found] == [
        ("a", "gpu-product"),
        ("b", "runtime-flags"),
        (None, "gpu-budget"),
    ]
    assert found[0].to_record() == {
        "rule": "gpu-product",
        "enforcement": "mandatory",
        "externalKey": "a",
        "message": "a: GPU product NVIDIA-H100 is not allowed here (allowed: NVIDIA-L40S)",
    }


def test_a_bad_policy_configuration_is_one_line_per_field() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_stack_config(
            samples.kubernetes(),
            [samples.replica()],
            {
                "gpuBudget": -1,
                "deniedFlags": ["trust-remote-code"],
                "enforcement": {"no-such-rule": "mandatory", "gpu-budget": "strict"},
                "podSecurity": "hardened",
                "colour": "blue",
            },
        )
    problems = refused.value.problems
    assert [p.split(":", 2)[1] for p in problems] == [
        "policy.gpuBudget",
        "policy.deniedFlags[0]",
        "policy.podSecurity",
        "policy.enforcement.no-such-rule",
        "policy.enforcement.gpu-budget",
        "policy.colour",
    ]
    assert all(p.startswith("infercrane:policy.") and "\n" not in p for p in problems)


def test_baseline_refuses_host_access_and_privilege() -> None:
    pod = {
        "hostNetwork": True,
        "securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]},
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "c",
                "securityContext": {
                    "privileged": True,
                    "capabilities": {"add": ["SYS_ADMIN", "CHOWN"]},
                },
                "ports": [{"containerPort": 80, "hostPort": 80}],
            }
        ],
    }
    assert podsecurity.violations(pod, "baseline") == [
        "hostNetwork is true",
        "unsafe sysctls kernel.msgmax",
        "volume root is a hostPath",
        "container c is privileged",
        "container c adds capabilities SYS_ADMIN",
        "container c uses a hostPort",
    ]
    assert podsecurity.violations(pod, "privileged") == []


def _platform_findings(
    platform: dict[str, Any], policy: dict[str, Any], replicas: list[dict[str, Any]]
) -> list[Finding]:
    config = parse_stack_config(samples.kubernetes(), replicas, policy)
    return list(evaluate_rendered(render(config, stack=None), parse_policy(platform, source="p")))


@pytest.mark.parametrize("workload_api", ["deployment", "kserve"])
def test_a_pod_reads_only_the_allowed_secrets_and_never_the_runners(workload_api: str) -> None:
    settings = {"workloadApi": workload_api, "workerSecretName": "infercrane-runner-state"}
    hf = {"hfToken": {"secretName": "team-hf", "key": "token"}}
    config = parse_stack_config(
        samples.kubernetes(**settings, **hf), [samples.replica()], {"allowedSecrets": ["team-hf"]}
    )
    assert list(evaluate_stack(config)) == [
        Finding(
            "secret-reference",
            "mandatory",
            "dep-7-r0",
            "dep-7-r0: Secret infercrane-runner-state is the runner's own, never a replica's",
        )
    ]
    # The runner's own Secret is refused even where a policy lists it.
    listed = {"allowedSecrets": ["infercrane-runner-state", "team-hf"]}
    assert [f.rule for f in _findings(listed, [samples.replica()], **settings, **hf)] == [
        "secret-reference"
    ]
    assert _findings({"allowedSecrets": []}, [samples.replica()], **hf) == [
        Finding(
            "secret-reference",
            "mandatory",
            "dep-7-r0",
            f"dep-7-r0: Secret {name} is not allowed here (allowed: none)",
        )
        for name in sorted({"infercrane-worker", "team-hf"})
    ]


def test_secret_names_are_every_secret_a_pod_spec_reads() -> None:
    pod = {
        "imagePullSecrets": [{"name": "pull"}],
        "initContainers": [
            {"envFrom": [{"secretRef": {"name": "init-env"}}, {"configMapRef": {}}]}
        ],
        "containers": [
            {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}}]}
        ],
        "volumes": [
            {"name": "v", "secret": {"secretName": "volume"}},
            {"name": "p", "projected": {"sources": [{"secret": {"name": "projected"}}]}},
            {"name": "e", "emptyDir": {}},
        ],
    }
    assert secret_names(pod) == {"pull", "init-env", "env", "volume", "projected"}


def test_the_runners_secrets_are_every_secret_its_shipped_manifest_names() -> None:
    manifest = (ROOT / "deploy" / "kubernetes" / "runner" / "runner.yaml").read_text()
    [deployment] = [d for d in yaml.safe_load_all(manifest) if d["kind"] == "Deployment"]
    assert secret_names(deployment["spec"]["template"]["spec"]) == RUNNER_SECRETS


def test_a_stack_file_only_tightens_the_platforms_policy() -> None:
    platform = {"allowedRegistries": ["ghcr.io/acme"], "allowedSecrets": ["infercrane-worker"]}
    hf = {"hfToken": {"secretName": "team-hf", "key": "token"}}
    replica = samples.replica()
    # Loosened or disabled by the stack file: the platform's finding stands, mandatory.
    loosening = {
        "allowedRegistries": ["registry.example"],
        "allowedSecrets": ["infercrane-worker", "team-hf"],
        "enforcement": {"secret-reference": "disabled", "image-registry": "advisory"},
    }
    config = parse_stack_config(samples.kubernetes(**hf), [replica], loosening)
    found = evaluate_rendered(render(config, stack=None), parse_policy(platform, source="p"))
    assert [(f.rule, f.enforcement) for f in found] == [
        ("image-registry", "mandatory"),
        ("secret-reference", "mandatory"),
    ]
    # What the stack file leaves out is the platform's; what it gives, it adds.
    assert _platform_findings(platform, {}, [replica]) == _platform_findings(
        platform, {"allowedRegistries": ["ghcr.io/acme"]}, [replica]
    )
    tightened = _platform_findings(
        {"allowedSecrets": ["infercrane-worker"]}, {"gpuProducts": ["NVIDIA-H100"]}, [replica]
    )
    assert tightened == [
        Finding(
            "gpu-product",
            "mandatory",
            "dep-7-r0",
            "dep-7-r0: GPU product NVIDIA-L40S is not allowed here (allowed: NVIDIA-H100)",
        )
    ]
    # A finding both report is reported once.
    flags = [samples.replica(runtimeArgs=["--trust-remote-code"])]
    assert [f.rule for f in _platform_findings({}, {}, flags)] == ["runtime-flags"]


def test_a_platform_policy_file_is_refused_one_line_per_problem(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    for text, problems in [
        ("", [f"--policy {path}: must be a mapping of infercrane:policy's keys"]),
        ("allowedSecrets: [a\n", [f"--policy {path}: not valid YAML"]),
        (
            "allowedSecret: [a]\ngpuBudget: -1\n",
            [
                f"--policy {path}: gpuBudget: Input should be greater than or equal to 0",
                f"--policy {path}: allowedSecret: is not a known key",
            ],
        ),
    ]:
        path.write_text(text)
        with pytest.raises(ConfigError) as refused:
            load_policy_file(path)
        assert list(refused.value.problems) == problems
    path.write_text("allowedSecrets: [infercrane-worker]\n")
    assert load_policy_file(path) == PolicySettings(allowed_secrets=("infercrane-worker",))


@pytest.mark.parametrize("schema", ["diff.schema.json", "envelope.schema.json"])
def test_every_rule_is_one_the_json_schemas_name(schema: str) -> None:
    """A finding's rule in the JSON the CLI prints: a new rule once printed outside its enum."""
    document = json.loads((ROOT / "infercrane_pulumi" / "schemas" / schema).read_text())
    assert document["$defs"]["finding"]["properties"]["rule"]["enum"] == list(get_args(RuleId))
