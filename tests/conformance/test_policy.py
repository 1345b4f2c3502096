"""The namespace's policy through the real engine: a mandatory rule refuses the run before any
write, whichever driver runs the program; an advisory one is a warning and the run goes on."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from infercrane_pulumi.config.intents import PolicySettings
from infercrane_pulumi.errors import EXIT_POLICY, PolicyViolationError
from infercrane_pulumi.objects import kinds, naming
from infercrane_pulumi.policy.rules import Finding
from infercrane_pulumi.review.changes import PolicyFinding
from tests.conformance.harness import NO_SUCH_GPU, Harness, intent, replica
from tests.conformance.test_cli_and_faults import cli_env

pytestmark = pytest.mark.conformance


def _nothing_written(harness: Harness) -> None:
    assert harness.owned(kinds.DEPLOYMENT) == []
    assert harness.owned(kinds.SERVICE) == []


def test_namespace_stack_refuses_a_mandatory_violation_and_writes_nothing(
    harness: Harness, tmp_path: Path
) -> None:
    stack = dataclasses.replace(
        harness.namespace_stack(tmp_path / "workspace"),
        policy=PolicySettings.model_validate({"gpuBudget": 1, "modelPatterns": ["meta-llama/*"]}),
    )
    with pytest.raises(PolicyViolationError) as refused:
        stack.ensure([intent("policy-a"), intent("policy-b")])
    assert refused.value.problems == ("the replicas hold 2 GPUs, over the namespace's budget of 1",)
    assert not refused.value.retryable
    _nothing_written(harness)
    result = stack.ensure([intent("policy-a")])
    assert [r.external_key for r in result.replicas] == ["policy-a"]
    # Advisory: the run goes on and says so, per key.
    assert result.policy == (
        PolicyFinding(
            Finding(
                "model-name",
                "advisory",
                "policy-a",
                "policy-a: model Qwen/Qwen3-0.6B matches none of meta-llama/*",
            )
        ),
    )
    applied = harness.written()
    _, [apply] = applied[f"Deployment/{naming.object_name('policy-a')}"]
    assert apply["operation"] == "Apply"
    # A stricter policy refuses even a run whose intents are verified unchanged.
    stricter = dataclasses.replace(stack, policy=PolicySettings(gpu_products=("NVIDIA-A100",)))
    with pytest.raises(PolicyViolationError):
        stricter.ensure([intent("policy-a")])
    assert harness.written() == applied
    stack.destroy()


def test_a_stack_files_policy_refuses_with_its_exit_code_and_warns_advisory(
    harness: Harness,
) -> None:
    harness.configure(
        [replica("policy-flag", runtimeArgs=["--trust-remote-code"])],
        policy={"modelPatterns": ["meta-llama/*"]},
    )
    done = harness.cli_up(cli_env(harness))
    assert done.returncode == EXIT_POLICY, done.stderr
    assert json.loads(done.stdout)["error"] == {
        "code": "policy-violation",
        "retryable": False,
        "problems": ["policy-flag: --trust-remote-code is in the runtime's argv"],
    }
    _nothing_written(harness)
    # Allowed by the namespace: the run goes on, the model outside the patterns is a warning.
    flagged = [replica(k, runtimeArgs=["--trust-remote-code"]) for k in ("policy-flag", "gone")]
    harness.configure(
        flagged,
        policy={"modelPatterns": ["meta-llama/*"], "allowedFlags": ["--trust-remote-code"]},
    )
    result = harness.up()
    assert harness.get(kinds.DEPLOYMENT, "policy-flag") is not None
    message = "policy-flag: model Qwen/Qwen3-0.6B matches none of meta-llama/*"
    assert [p.finding.message for p in result.findings_of("policy-flag")] == [message]
    # A person running `pulumi up` on this stack sees it as the engine's warning.
    assert any(f"[policy model-name] {message}" in line for line in harness.log)
    # A stricter policy pending in the file never blocks a removal: it only deletes.
    harness.configure(flagged, policy={})
    removed = harness.cli(
        "remove",
        "--stack",
        harness.stack_name,
        "--project-dir",
        str(harness.project_dir),
        "--key",
        "gone",
        env=cli_env(harness),
    )
    assert removed.returncode == 0, removed.stderr
    assert harness.get(kinds.DEPLOYMENT, "gone") is None
    assert harness.get(kinds.DEPLOYMENT, "policy-flag") is not None
    harness.destroy()


def test_the_platforms_policy_refuses_what_a_stack_file_allows_itself(
    harness: Harness, tmp_path: Path
) -> None:
    platform = tmp_path / "platform-policy.yaml"
    platform.write_text("allowedSecrets: [infercrane-worker]\n")
    up = ("up", "--stack", harness.stack_name, "--project-dir", str(harness.project_dir))
    # The stack file reads the runner's own Secret and the team's token, and turns the rule off
    # for itself: the platform's copy of the rule still finds both.
    loosening = {"allowedSecrets": ["team-hf"], "enforcement": {"secret-reference": "disabled"}}
    harness.configure(
        [replica("policy-secret")],
        policy=loosening,
        workerSecretName="infercrane-runner-state",
        hfToken={"secretName": "team-hf", "key": "token"},
    )
    done = harness.cli(*up, "--policy", str(platform), "--json", env=cli_env(harness))
    assert done.returncode == EXIT_POLICY, done.stderr
    assert json.loads(done.stdout)["error"] == {
        "code": "policy-violation",
        "retryable": False,
        "problems": [
            "policy-secret: Secret infercrane-runner-state is the runner's own, never a replica's",
            "policy-secret: Secret team-hf is not allowed here (allowed: infercrane-worker)",
        ],
    }
    _nothing_written(harness)
    # Within the platform's limits, the stack file's own still bind: it only tightens them.
    harness.configure([replica("policy-secret")], policy={"gpuProducts": ["NVIDIA-H100"]})
    done = harness.cli(*up, "--policy", str(platform), "--json", env=cli_env(harness))
    assert json.loads(done.stdout)["error"]["problems"] == [
        f"policy-secret: GPU product {NO_SUCH_GPU} is not allowed here (allowed: NVIDIA-H100)"
    ]
    _nothing_written(harness)
    harness.configure([replica("policy-secret")])
    done = harness.cli(*up, "--policy", str(platform), "--json", env=cli_env(harness))
    assert done.returncode == 0, done.stdout + done.stderr
    assert harness.get(kinds.DEPLOYMENT, "policy-secret") is not None
    harness.destroy()
