"""Drift as two LISTs see it: an applied object gone, or carrying another intent."""

from __future__ import annotations

from typing import Any

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.cluster.drift import drift
from infercrane_pulumi.config_rules import parse_stack_config
from tests.unit import samples

APPLIED = parse_stack_config(
    samples.kubernetes(), [samples.replica(externalKey="a"), samples.replica(externalKey="b")]
)
NS = "infercrane-system"


def live_metadata(config: Any = APPLIED) -> dict[str, dict[str, dict[str, Any]]]:
    found: dict[str, dict[str, dict[str, Any]]] = {"Deployment": {}, "Service": {}}
    for obj in workloads.stack_objects(config):
        found[obj["kind"]][obj["metadata"]["name"]] = obj["metadata"]
    return found


def test_a_cluster_holding_exactly_what_was_applied_has_no_drift() -> None:
    assert drift(APPLIED, live_metadata()) == []


def test_an_object_deleted_out_of_band_is_drift() -> None:
    live = live_metadata()
    del live["Service"][naming.object_name("b")]
    assert drift(APPLIED, live) == [f"Service/{NS}/{naming.object_name('b')}: gone"]


def test_an_object_carrying_another_intent_is_drift() -> None:
    older = parse_stack_config(
        samples.kubernetes(),
        [samples.replica(externalKey="a", modelRevision="old"), samples.replica(externalKey="b")],
    )
    live = live_metadata(older)
    name = naming.object_name("a")
    assert drift(APPLIED, live) == [
        f"Deployment/{NS}/{name}: carries another intent than the one applied",
        f"Service/{NS}/{name}: carries another intent than the one applied",
    ]


def test_objects_outside_the_applied_intents_are_not_drift() -> None:
    more = parse_stack_config(
        samples.kubernetes(), [samples.replica(externalKey=k) for k in ("a", "b", "c")]
    )
    assert drift(APPLIED, live_metadata(more)) == []
