"""When a run is a verified no-op, and every way it stops being one."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from infercrane_pulumi import naming
from infercrane_pulumi.cluster.unchanged import Applied, why_not_unchanged
from infercrane_pulumi.intents import parse_stack_config
from tests.unit import samples
from tests.unit.test_run import applied, record

CONFIG = parse_stack_config(
    samples.kubernetes(), [samples.replica(externalKey=k) for k in ("a", "b")]
)
NAME = naming.object_name("a")
DEPLOYMENT = f"Deployment/infercrane-system/{NAME}"
Live = dict[str, dict[str, dict[str, Any]]]


def snapshot(objects: list[dict[str, Any]]) -> Live:
    found: Live = {"Deployment": {}, "Service": {}}
    for obj in objects:
        found[obj["kind"]][obj["metadata"]["name"]] = obj["metadata"]
    return found


def deployment_of_a(live: Live) -> dict[str, Any]:
    return live["Deployment"][NAME]


def test_exactly_what_the_last_apply_left_is_unchanged() -> None:
    live = snapshot(applied(CONFIG))
    # Status updates and the Deployment controller's own annotation are not changes.
    deployment_of_a(live)["managedFields"].append(
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"}
    )
    deployment_of_a(live)["annotations"]["deployment.kubernetes.io/revision"] = "1"
    assert why_not_unchanged(CONFIG, record(CONFIG), live) == []


def _set(*path: str, value: Any) -> Callable[[Live], None]:
    def change(live: Live) -> None:
        target = deployment_of_a(live)
        *parents, last = path
        for part in parents:
            target = target[part]
        target[last] = value

    return change


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda live: live["Deployment"].pop(NAME), f"{DEPLOYMENT}: gone"),
        (
            _set("generation", value=2),
            f"{DEPLOYMENT}: not the object, or not the spec, the last apply left",
        ),
        (
            _set("uid", value="a-look-alike"),
            f"{DEPLOYMENT}: not the object, or not the spec, the last apply left",
        ),
        (
            _set("labels", "app.kubernetes.io/managed-by", value="helm"),
            f"{DEPLOYMENT}: its labels differ from ours",
        ),
        (
            _set("annotations", naming.ANNOTATION_INTENT_HASH, value="sha256:other"),
            f"{DEPLOYMENT}: its annotations differ from ours",
        ),
        (
            lambda live: deployment_of_a(live)["managedFields"].append(
                {"manager": "kubectl", "operation": "Update"}
            ),
            f"{DEPLOYMENT}: its field managers changed",
        ),
        (
            lambda live: deployment_of_a(live).__setitem__("managedFields", []),
            f"{DEPLOYMENT}: its field managers changed",
        ),
    ],
    ids=["gone", "spec changed", "replaced", "label", "annotation", "take-over manager", "forced"],
)
def test_any_difference_says_why_and_nothing_else_is_claimed(
    change: Callable[[Live], None], reason: str
) -> None:
    live = snapshot(applied(CONFIG))
    change(live)
    assert why_not_unchanged(CONFIG, record(CONFIG), live) == [reason]


def test_other_intents_or_an_older_record_are_never_unchanged() -> None:
    live = snapshot(applied(CONFIG))
    fewer = parse_stack_config(samples.kubernetes(), [samples.replica(externalKey="a")])
    assert why_not_unchanged(fewer, record(CONFIG), live) == [
        "the intents differ from those the stack applied"
    ]
    older = record(CONFIG, uids=False)
    assert len(why_not_unchanged(CONFIG, older, live)) == 4
    assert why_not_unchanged(CONFIG, Applied(), copy.deepcopy(live)) == [
        "the intents differ from those the stack applied"
    ]
