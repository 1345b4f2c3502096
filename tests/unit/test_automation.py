"""The Automation API wrapper's pure parts: environment, error classification, stale locks."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from infercrane_pulumi import automation
from infercrane_pulumi.errors import (
    ClusterUnavailableError,
    ConfigError,
    OwnershipError,
    RejectedError,
)


def engine_output(code: str, *problems: str) -> str:
    listing = "".join(f"\n      - {p}" for p in problems)
    refusal = f"[{code}] InferCrane refused to continue:{listing}"
    return (
        "Updating (t1):\n"
        " -  kubernetes:apps/v1:Deployment infercrane-x-deployment deleting (0s)\n"
        "Diagnostics:\n  pulumi:pulumi:Stack (infercrane-t1):\n"
        f"    error: {refusal}\n    error: an unhandled error occurred: {refusal}\n"
    )


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("invalid-config", ConfigError),
        ("ownership-conflict", OwnershipError),
        ("rejected", RejectedError),
        ("cluster-unavailable", ClusterUnavailableError),
    ],
)
def test_a_refusal_becomes_its_typed_error_with_each_problem_once(
    code: str, expected: type[Exception]
) -> None:
    error = automation.classify(engine_output(code, "Deployment/ns/a: one", "Service/ns/a: two"))
    assert type(error) is expected
    assert str(error) in {
        "Deployment/ns/a: one; Service/ns/a: two",
        "Deployment/ns/a: one\nService/ns/a: two",
    }


def test_an_engine_failure_without_a_refusal_keeps_the_error_lines() -> None:
    error = automation.classify("Updating:\n    error: update failed\n")
    assert isinstance(error, automation.RunFailedError)
    assert str(error) == "error: update failed"


def test_environment_is_explicit_and_pins_plugins(tmp_path: Path) -> None:
    env = automation.PulumiEnvironment(
        state_dir=tmp_path / "state",
        pulumi_home=tmp_path / "home",
        passphrase="p",
        bin_dir=tmp_path / "bin",
        kubeconfig=tmp_path / "kubeconfig",
    )
    variables = env.variables()
    assert variables["PULUMI_BACKEND_URL"] == (tmp_path / "state").as_uri()
    assert variables["PULUMI_HOME"] == str(tmp_path / "home")
    assert variables["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert variables["PULUMI_IGNORE_AMBIENT_PLUGINS"] == "true"
    assert variables["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert variables["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")
    assert variables["KUBECONFIG"] == str(tmp_path / "kubeconfig")


def write_lock(env: automation.PulumiEnvironment, name: str, pid: int, host: str) -> Path:
    lock_dir = env.state_dir / ".pulumi" / "locks" / "organization" / "infercrane" / "t1"
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{name}.json"
    path.write_text(json.dumps({"pid": pid, "hostname": host, "username": "root"}))
    return path


def test_only_locks_of_dead_processes_on_this_host_are_stale(tmp_path: Path) -> None:
    env = automation.PulumiEnvironment(state_dir=tmp_path, pulumi_home=tmp_path, passphrase="p")
    dead_pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have it
    dead = write_lock(env, "dead", dead_pid, socket.gethostname())
    write_lock(env, "alive", os.getpid(), socket.gethostname())
    write_lock(env, "remote", dead_pid, "another-machine")
    assert automation.stale_locks(env, "t1") == [dead]
    assert automation.stale_locks(env, "other-stack") == []
