"""Per-key results from engine events: the change of each key, its objects, and drift."""

from __future__ import annotations

from typing import Any

from pulumi import automation as auto

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.automation.results import ObjectChange, ReplicaChange, stack_result
from infercrane_pulumi.changes import Drift, Summary
from infercrane_pulumi.intents import parse_stack_config
from tests.unit import samples

STACK = "urn:pulumi:s::infercrane::"
CONFIG = parse_stack_config(
    samples.kubernetes(),
    [samples.replica(externalKey=k) for k in ("kept", "changed", "added")],
)


def state(key: str, kind: str, uid: str | None) -> dict[str, Any]:
    [obj] = [
        o
        for o in workloads.stack_objects(
            parse_stack_config(samples.kubernetes(), [samples.replica(externalKey=key)])
        )
        if o["kind"] == kind
    ]
    outputs = {"metadata": {"uid": uid}} if uid else {}
    return {"inputs": obj, "outputs": outputs}


def event(
    kind_of_event: str,
    op: str,
    key: str,
    kind: str,
    *,
    old_uid: str | None = None,
    new_uid: str | None = None,
    old: bool = True,
    new: bool = True,
    diffs: list[str] | None = None,
) -> auto.EngineEvent:
    type_token = {
        "Deployment": "kubernetes:apps/v1:Deployment",
        "Service": "kubernetes:core/v1:Service",
    }[kind]
    name = f"{naming.object_name(key)}-{kind.lower()}"
    metadata = {
        "op": op,
        "urn": f"{STACK}infercrane:kubernetes:Replica${type_token}::{name}",
        "type": type_token,
        "provider": "",
        "old": state(key, kind, old_uid) if old else None,
        "new": state(key, kind, new_uid) if new else None,
        "diffs": diffs or [],
    }
    return auto.EngineEvent.from_json(
        {"sequence": 1, "timestamp": 0, kind_of_event: {"metadata": metadata}}
    )


def both(op: str, key: str, kind: str, **kwargs: Any) -> list[auto.EngineEvent]:
    """A step as the engine reports it: before it runs, then with its outputs."""
    return [
        event("resourcePreEvent", op, key, kind, **kwargs),
        event("resOutputsEvent", op, key, kind, **kwargs),
    ]


def test_each_key_gets_its_change_objects_uids_and_changed_fields() -> None:
    events = [
        # The refresh first: the Service of "kept" was deleted behind Pulumi's back.
        *both("refresh", "kept", "Deployment", old_uid="d1", new_uid="d1"),
        event("resOutputsEvent", "refresh", "kept", "Service", old_uid="s1", new=False),
        *both("same", "kept", "Deployment", old_uid="d1", new_uid="d1"),
        *both("create", "kept", "Service", old=False, new_uid="s1b"),
        *both("update", "changed", "Deployment", old_uid="d2", new_uid="d2", diffs=["spec"]),
        *both("same", "changed", "Service", old_uid="s2", new_uid="s2"),
        event("resourcePreEvent", "create", "added", "Deployment", old=False),
        event("resOutputsEvent", "create", "added", "Deployment", old=False, new_uid="d3"),
        *both("create", "added", "Service", old=False, new_uid="s3"),
        *both("delete", "gone", "Deployment", old_uid="d4", new=False),
        *both("delete", "gone", "Service", old_uid="s4", new=False),
    ]
    result = stack_result("up", "s", CONFIG, events)
    name = naming.object_name
    ns = "infercrane-system"
    assert result.replicas == (
        ReplicaChange(
            "kept",
            "update",
            f"kubernetes:deployment:{ns}/{name('kept')}",
            f"http://{name('kept')}.{ns}.svc:8000",
            (
                ObjectChange("Deployment", name("kept"), "d1", "same", ()),
                ObjectChange("Service", name("kept"), "s1b", "create", ()),
            ),
        ),
        ReplicaChange(
            "changed",
            "update",
            f"kubernetes:deployment:{ns}/{name('changed')}",
            f"http://{name('changed')}.{ns}.svc:8000",
            (
                ObjectChange("Deployment", name("changed"), "d2", "update", ("spec",)),
                ObjectChange("Service", name("changed"), "s2", "same", ()),
            ),
        ),
        ReplicaChange(
            "added",
            "create",
            f"kubernetes:deployment:{ns}/{name('added')}",
            f"http://{name('added')}.{ns}.svc:8000",
            (
                ObjectChange("Deployment", name("added"), "d3", "create", ()),
                ObjectChange("Service", name("added"), "s3", "create", ()),
            ),
        ),
        ReplicaChange(
            "gone",
            "delete",
            None,
            None,
            (
                ObjectChange("Deployment", name("gone"), "d4", "delete", ()),
                ObjectChange("Service", name("gone"), "s4", "delete", ()),
            ),
        ),
    )
    assert result.summary == Summary(add=1, change=2, destroy=1, same=0)
    assert result.drift == (Drift("kept", "Service", name("kept"), fields=(), gone=True),)


def test_a_replacement_is_one_replace_whatever_order_its_steps_come_in() -> None:
    events = [
        *both("create-replacement", "kept", "Service", old_uid="s1", new_uid="s9"),
        *both("replace", "kept", "Service", old_uid="s1", new_uid="s9"),
        *both("delete-replaced", "kept", "Service", old_uid="s1", new=False),
        *both("same", "kept", "Deployment", old_uid="d1", new_uid="d1"),
    ]
    [kept, changed, added] = stack_result("up", "s", CONFIG, events).replicas
    assert kept.change == "replace"
    assert kept.objects[0] == ObjectChange(
        "Service", naming.object_name("kept"), "s9", "replace", ()
    )
    assert (changed.change, added.change) == ("same", "same")


def test_components_providers_and_foreign_resources_are_not_objects_of_a_key() -> None:
    provider = auto.EngineEvent.from_json(
        {
            "sequence": 1,
            "timestamp": 0,
            "resourcePreEvent": {
                "metadata": {
                    "op": "same",
                    "urn": f"{STACK}pulumi:providers:kubernetes::infercrane-ns",
                    "type": "pulumi:providers:kubernetes",
                    "provider": "",
                }
            },
        }
    )
    result = stack_result("preview", "s", CONFIG, [provider])
    assert [r.objects for r in result.replicas] == [(), (), ()]
    assert result.summary == Summary(add=0, change=0, destroy=0, same=3)
