"""A driver's run with InferCrane's policy pack: what is checked before the engine starts, and
what the pack found, read from the engine's events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation.policypack import PolicyPack, findings
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.policy.rules import RULES, Finding

ROOT = Path(__file__).resolve().parents[2]


def _pack(directory: Path, *, venv: bool = True) -> Path:
    """A copy of the repository's pack's project file, with or without its virtualenv."""
    directory.mkdir(parents=True)
    (directory / "PulumiPolicy.yaml").write_text(
        (ROOT / "policy" / "PulumiPolicy.yaml").read_text()
    )
    if venv:
        (directory / "venv" / "bin").mkdir(parents=True)
        (directory / "venv" / "bin" / "python").write_text("")
    return directory


def test_a_pack_asks_the_engine_for_itself_and_its_configuration(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    assert PolicyPack(ROOT / "policy").flags() == ("--policy-pack", str(ROOT / "policy"))
    assert PolicyPack(ROOT / "policy", config).flags() == (
        "--policy-pack",
        str(ROOT / "policy"),
        "--policy-pack-config",
        str(config),
    )


def test_a_pack_the_engine_could_not_run_is_refused_in_one_line_each(tmp_path: Path) -> None:
    PolicyPack(_pack(tmp_path / "ready")).check()
    with pytest.raises(ConfigError) as refused:
        PolicyPack(tmp_path / "nowhere").check()
    assert refused.value.problems == (
        f"policy pack {tmp_path / 'nowhere'}: no PulumiPolicy.yaml naming a Python virtualenv",
    )
    bare = _pack(tmp_path / "bare", venv=False)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model-name": "advisory"}))
    with pytest.raises(ConfigError) as refused:
        PolicyPack(bare, config).check()
    assert refused.value.problems == (
        f"policy pack {bare}: its virtualenv venv is missing (make policy-venv)",
        "policy pack config: model-name: is not a rule of the pack (all, image-registry, "
        "gpu-product, runtime-flags, pod-security, gpu-budget, secret-reference)",
    )
    assert not refused.value.retryable
    config.write_text("{not json")
    with pytest.raises(ConfigError) as refused:
        PolicyPack(tmp_path / "ready", config).check()
    [problem] = refused.value.problems
    assert problem.startswith(f"policy pack config {config}: not a JSON file (")


def _policy_event(rule: str, level: str, message: str, urn: str | None = None) -> Any:
    """A policy event as the engine writes it for InferCrane's pack (seen through the pinned
    CLI): the rule's description, then the pack's message."""
    description = next(r.description for r in RULES if r.id == rule)
    return auto.EngineEvent.from_json(
        {
            "sequence": 1,
            "timestamp": 1,
            "policyEvent": {
                "message": f"{description}\n{message}\n",
                "policyName": rule,
                "policyPackName": "infercrane",
                "policyPackVersion": "0.0.1",
                "enforcementLevel": level,
                **({} if urn is None else {"resourceUrn": urn}),
            },
        }
    )


def test_the_packs_findings_are_read_from_the_engines_events_each_once() -> None:
    urn = "urn:pulumi:s::infercrane::infercrane:kubernetes:Replica$kubernetes:apps/v1:Deployment::x"
    flagged = _policy_event("runtime-flags", "mandatory", "a: --api-key is in argv", urn)
    events = [
        flagged,
        _policy_event("gpu-budget", "advisory", "the replicas hold 2 GPUs, over 1"),
        flagged,  # an up reports what its preview reported
        auto.EngineEvent.from_json({"sequence": 2, "timestamp": 1, "cancelEvent": {}}),
    ]
    reported = [e.policy_event for e in events if e.policy_event is not None]
    assert findings(reported, {urn: "a"}) == (
        Finding("runtime-flags", "mandatory", "a", "a: --api-key is in argv"),
        Finding("gpu-budget", "advisory", None, "the replicas hold 2 GPUs, over 1"),
    )
    other = auto.EngineEvent.from_json(
        {"sequence": 3, "timestamp": 1, "policyEvent": {"policyPackName": "theirs"}}
    )
    assert other.policy_event is not None
    assert findings([other.policy_event], {}) == ()
