"""A driver's run with InferCrane's policy pack: what is checked before the engine starts, and
what the pack found, read from the engine's events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infercrane_pulumi.automation.policypack import PolicyPack
from infercrane_pulumi.errors import ConfigError

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
        "gpu-product, runtime-flags, pod-security, gpu-budget)",
    )
    assert not refused.value.retryable
    config.write_text("{not json")
    with pytest.raises(ConfigError) as refused:
        PolicyPack(tmp_path / "ready", config).check()
    [problem] = refused.value.problems
    assert problem.startswith(f"policy pack config {config}: not a JSON file (")
