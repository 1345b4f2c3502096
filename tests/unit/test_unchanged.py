"""Which keys a run may leave as they are, and every way a key stops being one of them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from infercrane_pulumi import naming
from infercrane_pulumi.cluster.unchanged import Applied, differences, verified_keys
from infercrane_pulumi.config_rules import parse_stack_config
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
    assert differences(CONFIG, record(CONFIG), live) == {"a": [], "b": []}
    assert verified_keys(CONFIG, record(CONFIG), live) == {"a", "b"}


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
    assert differences(CONFIG, record(CONFIG), live) == {"a": [reason], "b": []}
    assert verified_keys(CONFIG, record(CONFIG), live) == {"b"}


def test_a_changed_intent_a_new_key_or_an_older_record_is_never_verified() -> None:
    live = snapshot(applied(CONFIG))
    edited = parse_stack_config(
        samples.kubernetes(),
        [samples.replica(externalKey="a", modelRevision="r2"), samples.replica(externalKey="b")],
    )
    assert verified_keys(edited, record(CONFIG), live) == {"b"}
    grown = parse_stack_config(
        samples.kubernetes(), [samples.replica(externalKey=k) for k in ("a", "b", "c")]
    )
    assert verified_keys(grown, record(CONFIG), live) == {"a", "b"}
    older = record(CONFIG, uids=False)
    assert verified_keys(CONFIG, older, live) == set()
    assert [len(why) for why in differences(CONFIG, older, live).values()] == [2, 2]
    assert verified_keys(CONFIG, Applied(), copy.deepcopy(live)) == set()
