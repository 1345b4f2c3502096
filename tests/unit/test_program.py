"""The program's entry: configuration from the hermetic host's file when the host wrote one."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi

from infercrane_pulumi.program.program import HOST_CONFIG_FILE_ENV, load_host_config


def test_a_configuration_too_large_for_the_environment_arrives_through_the_file(
    tmp_path: Path,
) -> None:
    replicas = [
        {"externalKey": f"k-{i}", "model": "m" * 100, "gpu": "NVIDIA-L4"} for i in range(2000)
    ]
    config = {"infercrane:replicas": json.dumps(replicas), "infercrane:kubernetes": "{}"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"config": config, "secretKeys": ["infercrane:kubernetes"]}))
    assert len(config["infercrane:replicas"]) > 128 * 1024  # more than one env string may hold
    load_host_config({HOST_CONFIG_FILE_ENV: str(path)})
    assert pulumi.Config("infercrane").get_object("replicas") == replicas
    assert pulumi.runtime.is_config_secret("infercrane:kubernetes")


def test_without_the_file_the_configuration_is_left_alone(tmp_path: Path) -> None:
    pulumi.runtime.set_all_config({"infercrane:replicas": "[]"}, [])
    load_host_config({})
    assert pulumi.Config("infercrane").get_object("replicas") == []
