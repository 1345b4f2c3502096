"""What a stack applied, read from its outputs, and the one ``remove`` built on it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infercrane_pulumi.automation import stacks
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config import files
from infercrane_pulumi.config.intents import KubernetesSettings, PolicySettings, StackConfig
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import ConfigError, DamagedStateError, UnsettledStateError
from infercrane_pulumi.objects import naming
from infercrane_pulumi.program.records import Applied, AppliedObject
from tests.unit import samples
from tests.unit.fake_cluster import FakeTransport
from tests.unit.fake_stacks import FakeStack, serve
from tests.unit.test_run import applied as live_objects
from tests.unit.test_run import record

APPLIED = parse_stack_config(
    samples.kubernetes(), [samples.replica(externalKey=k) for k in ("a", "b")]
)
# A removal only deletes: what it keeps is not judged again.
NO_POLICY = PolicySettings.judging_nothing()
PENDING = samples.kubernetes(imageDigest=f"registry.example/vllm@sha256:{'ef' * 32}")


def outputs_of(outputs: dict[str, Any] | None, backend: str | None = None) -> Any:
    """A stack on ``backend`` whose ``pulumi stack output --json`` prints ``outputs`` (None:
    the CLI must not be asked)."""

    def run(*_: Any) -> Any:
        if outputs is None:
            raise AssertionError("the CLI was asked")
        return SimpleNamespace(stdout=json.dumps(outputs))

    variables = {} if backend is None else {"PULUMI_BACKEND_URL": backend}
    command = SimpleNamespace(run=run)
    workspace = SimpleNamespace(pulumi_command=command, work_dir="w", env_vars=variables)
    return SimpleNamespace(name="s1", workspace=workspace)


def outputs(settings: Any) -> dict[str, Any]:
    intent = APPLIED.replicas[0].model_dump(mode="json", by_alias=True)
    objects = [{"kind": "Service", "name": "svc", "uid": "u-1", "generation": 1}]
    return {
        "namespace": "infercrane-system",
        "workloadApi": "deployment",
        "replicas": {"a": {"intent": intent, "objects": objects}},
    } | ({} if settings is None else {naming.SETTINGS_OUTPUT: settings})


@pytest.mark.parametrize("recorded", [True, False], ids=["recorded", "before-the-record"])
def test_the_applied_settings_are_read_from_the_outputs(recorded: bool) -> None:
    record_ = files.settings_record(APPLIED.kubernetes) if recorded else None
    written = outputs(record_)
    assert stacks.applied(outputs_of(written)) == Applied(
        intents=APPLIED.replicas[:1],
        objects={"a": (AppliedObject("Service", "svc", "u-1", 1),)},
        settings=APPLIED.kubernetes if recorded else None,
        records={"a": written["replicas"]["a"]},
    )


def test_a_recorded_setting_we_never_write_is_damaged_state() -> None:
    with pytest.raises(DamagedStateError) as raised:
        stacks.applied(outputs_of(outputs({"context": "c"})))  # no imageDigest
    assert raised.value.problems == (
        "stack s1: its outputs are not what InferCrane writes (ValidationError); restore the "
        "state from a backup or export",
    )


def removal(
    monkeypatch: pytest.MonkeyPatch, applied: Applied, given: Any, *, unrecorded: str = ""
) -> StackConfig:
    """``remove("b")`` on a stack whose outputs say ``applied``, and whose state holds their
    keys' components and ``unrecorded``'s too, if given."""
    serve(monkeypatch, applied)
    transport = FakeTransport(live=live_objects(APPLIED))
    settings = KubernetesSettings.model_validate(given)
    held = (*(i.external_key for i in applied.intents), *filter(None, [unrecorded]))
    stack: Any = FakeStack("s1", Path("ws"), held)
    config, read = stacks.removal(stack, "b", settings, lambda _: Cluster(transport))
    assert read == applied
    return config


@pytest.mark.parametrize("given", [samples.kubernetes(), PENDING], ids=["same", "pending"])
def test_remove_keeps_the_other_keys_under_the_recorded_settings(
    monkeypatch: pytest.MonkeyPatch, given: Any
) -> None:
    recorded = dataclasses.replace(record(APPLIED), settings=APPLIED.kubernetes)
    kept = APPLIED.model_copy(update={"replicas": APPLIED.replicas[:1], "policy": NO_POLICY})
    assert removal(monkeypatch, recorded, given) == kept


def test_a_state_holding_replicas_its_outputs_do_not_record_refuses_a_removal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that failed midway left a component its outputs never recorded: what the stack
    applied is not known, so a removal is refused (retryable: an ensure settles it)."""
    recorded = dataclasses.replace(record(APPLIED), settings=APPLIED.kubernetes)
    with pytest.raises(UnsettledStateError) as raised:
        removal(monkeypatch, recorded, samples.kubernetes(), unrecorded="c")
    assert raised.value.retryable
    assert raised.value.problems == (
        f"stack s1: its state holds 1 replica(s) its last successful run did not record "
        f"({naming.object_name('c')}: a run failed or was stopped midway); ensure the desired "
        "set first (it settles the state), then remove",
    )


def test_outputs_before_the_record_run_the_given_settings_once_proven(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kept = APPLIED.model_copy(update={"replicas": APPLIED.replicas[:1], "policy": NO_POLICY})
    unrecorded = dataclasses.replace(record(APPLIED), settings=None)
    assert removal(monkeypatch, unrecorded, samples.kubernetes()) == kept
    with pytest.raises(ConfigError) as raised:
        removal(monkeypatch, unrecorded, PENDING)
    assert raised.value.problems == (
        "stack s1: its state does not record the settings it applied, and the objects of a "
        "are not as the given settings would apply them; run `up` once (it records them), "
        "then remove",
    )
