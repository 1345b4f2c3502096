"""Per-key results from engine events: the change of each key, its objects, and drift."""

from __future__ import annotations

from typing import Any

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation.results import (
    StackResult,
    stack_result,
    unchanged,
    with_deletions,
)
from infercrane_pulumi.cluster.verdict import judge
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.workloads import KINDS, render
from infercrane_pulumi.program.records import Applied, AppliedObject
from infercrane_pulumi.review import changes, yamldiff
from infercrane_pulumi.review.changes import Drift, KeyChange, ObjectChange, Summary
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
    result = stack_result("up", "s", render(CONFIG, stack=None), events)
    name = naming.object_name
    ns = "infercrane-system"

    def row(key: str) -> tuple[Any, ...]:
        replica = result.replica(key)
        assert replica is not None
        objects = [(o.kind, o.name, o.uid, o.change, o.fields) for o in replica.objects]
        return (replica.change, replica.resource_id, replica.endpoint, objects)

    def route(key: str) -> tuple[str, str]:
        return (f"kubernetes:deployment:{ns}/{name(key)}", f"http://{name(key)}.{ns}.svc:8000")

    assert [r.external_key for r in result.replicas] == ["kept", "changed", "added", "gone"]
    assert row("kept") == (
        "update",
        *route("kept"),
        [
            ("Deployment", name("kept"), "d1", "same", ()),
            ("Service", name("kept"), "s1b", "create", ()),
        ],
    )
    assert row("changed") == (
        "update",
        *route("changed"),
        [
            ("Deployment", name("changed"), "d2", "update", ("spec",)),
            ("Service", name("changed"), "s2", "same", ()),
        ],
    )
    assert row("added") == (
        "create",
        *route("added"),
        [
            ("Deployment", name("added"), "d3", "create", ()),
            ("Service", name("added"), "s3", "create", ()),
        ],
    )
    assert row("gone") == (
        "delete",
        None,
        None,
        [
            ("Deployment", name("gone"), "d4", "delete", ()),
            ("Service", name("gone"), "s4", "delete", ()),
        ],
    )
    # Each object's diff is the model's diff of the inputs the engine compared.
    diffs = {(r.external_key, o.kind): o.diff for r in result.replicas for o in r.objects}
    inputs = {(k, kind): state(k, kind, None)["inputs"] for k, kind in diffs}
    assert diffs == {
        ("kept", "Deployment"): "",
        ("kept", "Service"): yamldiff.diff_objects(None, inputs["kept", "Service"]),
        ("changed", "Deployment"): "",  # same inputs here: the live object had drifted
        ("changed", "Service"): "",
        ("added", "Deployment"): yamldiff.diff_objects(None, inputs["added", "Deployment"]),
        ("added", "Service"): yamldiff.diff_objects(None, inputs["added", "Service"]),
        ("gone", "Deployment"): yamldiff.diff_objects(inputs["gone", "Deployment"], None),
        ("gone", "Service"): yamldiff.diff_objects(inputs["gone", "Service"], None),
    }
    assert result.summary == Summary(add=1, change=2, destroy=1, same=0)
    assert result.drift == (Drift("kept", "Service", name("kept"), fields=(), gone=True),)


def test_a_replacement_is_one_replace_whatever_order_its_steps_come_in() -> None:
    events = [
        *both("create-replacement", "kept", "Service", old_uid="s1", new_uid="s9"),
        *both("replace", "kept", "Service", old_uid="s1", new_uid="s9"),
        *both("delete-replaced", "kept", "Service", old_uid="s1", new=False),
        *both("same", "kept", "Deployment", old_uid="d1", new_uid="d1"),
    ]
    [kept, changed, added] = stack_result("up", "s", render(CONFIG, stack=None), events).replicas
    assert kept.change == "replace"
    service = kept.objects[0]
    assert (service.kind, service.name, service.uid, service.change) == (
        "Service",
        naming.object_name("kept"),
        "s9",
        "replace",
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
    result = stack_result("preview", "s", render(CONFIG, stack=None), [provider])
    assert [r.objects for r in result.replicas] == [(), (), ()]
    assert result.summary == Summary(add=0, change=0, destroy=0, same=3)


def steps(op: str, old: Manifest | None, new: Manifest | None) -> list[auto.EngineEvent]:
    """A step on one object as the engine reports it, from the object's two versions."""
    either = new or old
    assert either is not None
    token = KINDS[either["kind"]].pulumi_type
    metadata: dict[str, Any] = {
        "op": op,
        "urn": f"{STACK}infercrane:kubernetes:Replica${token}::{either['metadata']['name']}",
        "type": token,
        "provider": "",
        "old": None if old is None else {"inputs": old, "outputs": {}},
        "new": None if new is None else {"inputs": new, "outputs": {}},
        "diffs": [],
    }
    return [
        auto.EngineEvent.from_json({"sequence": 1, "timestamp": 0, kind: {"metadata": metadata}})
        for kind in ("resourcePreEvent", "resOutputsEvent")
    ]


def rendered(**replica: Any) -> list[Manifest]:
    settings = samples.kubernetes(**replica.pop("settings", {}))
    return workloads.stack_objects(
        parse_stack_config(settings, [samples.replica(externalKey="k", **replica)])
    )


DEPLOYMENT, SERVICE = rendered()
[INFERENCE_SERVICE] = rendered(settings={"workloadApi": "kserve"})
CHANGED, _ = rendered(runtimeArgs=["--max-model-len", "4096"])


@pytest.mark.parametrize(
    ("base", "head", "engine_steps", "expected"),
    [
        (
            [],
            [DEPLOYMENT, SERVICE],
            [("create", None, DEPLOYMENT), ("create", None, SERVICE)],
            "create",
        ),
        (
            [DEPLOYMENT, SERVICE],
            [],
            [("delete", DEPLOYMENT, None), ("delete", SERVICE, None)],
            "delete",
        ),
        (
            [DEPLOYMENT, SERVICE],
            [DEPLOYMENT, SERVICE],
            [("same", DEPLOYMENT, DEPLOYMENT), ("same", SERVICE, SERVICE)],
            "same",
        ),
        (
            [DEPLOYMENT, SERVICE],
            [CHANGED, SERVICE],
            [("update", DEPLOYMENT, CHANGED), ("same", SERVICE, SERVICE)],
            "update",
        ),
        (
            [DEPLOYMENT],
            [DEPLOYMENT, SERVICE],
            [("same", DEPLOYMENT, DEPLOYMENT), ("create", None, SERVICE)],
            "update",
        ),
        (
            [DEPLOYMENT, SERVICE],
            [INFERENCE_SERVICE],
            [
                ("create", None, INFERENCE_SERVICE),
                ("delete", DEPLOYMENT, None),
                ("delete", SERVICE, None),
            ],
            "replace",
        ),
    ],
    ids=["new key", "gone key", "unchanged", "in place", "object recreated", "workload-API switch"],
)
def test_the_engine_result_and_the_offline_diff_name_the_same_change(
    base: list[Manifest],
    head: list[Manifest],
    engine_steps: list[tuple[str, Manifest | None, Manifest | None]],
    expected: str,
) -> None:
    events = [event for op, old, new in engine_steps for event in steps(op, old, new)]
    config = parse_stack_config(samples.kubernetes(), [samples.replica(externalKey="k")])
    [engine] = stack_result("up", "s", render(config, stack=None), events).replicas
    [offline] = changes.stack_changes(
        operation="diff", project="p", stack="s", old=base, new=head
    ).replicas
    assert engine.change == offline.change == expected
    by_name = sorted((o.kind, o.change, o.diff) for o in engine.objects)
    assert by_name == sorted((o.kind, o.change, o.diff) for o in offline.objects)


def test_a_verified_no_op_is_every_key_same_as_applied_and_says_so() -> None:
    service = naming.object_name("kept")
    record = Applied(CONFIG.replicas, {"kept": (AppliedObject("Service", service, "u-1", 1),)})
    kept = (ObjectChange("Service", service, "same", uid="u-1"),)
    assert unchanged("up", "s", render(CONFIG, stack=None), record) == StackResult(
        operation="up",
        project="infercrane",
        stack="s",
        namespace="infercrane-system",
        replicas=tuple(
            KeyChange(
                intent.external_key,
                "same",
                kept if intent.external_key == "kept" else (),
                resource_id=naming.resource_id(CONFIG.kubernetes, intent.external_key),
                endpoint=workloads.endpoint(CONFIG.kubernetes, intent),
            )
            for intent in CONFIG.replicas
        ),
        notes=("Every key verified unchanged against the cluster: the engine did not run.",),
        verified_unchanged=True,
    )


def test_keys_a_run_deleted_itself_are_reported_once_after_the_engine_s() -> None:
    # The engine reported "gone" (its state held it); "orphan" was created by a run that died
    # before the state recorded it, so only the run's own deletion knows of it.
    events = [
        *both("same", "kept", "Deployment", old_uid="d1", new_uid="d1"),
        *both("delete", "gone", "Service", old_uid="s4", new=False),
    ]
    config = CONFIG.model_copy(update={"replicas": CONFIG.replicas[:1]})
    stack_label = naming.stack_identity("infercrane", "s")
    live: dict[str, dict[str, dict[str, Any]]] = {"Deployment": {}, "Service": {}}
    for key, uid in (("gone", "s4"), ("orphan", "s5")):
        [service] = [
            o
            for o in workloads.stack_objects(
                parse_stack_config(samples.kubernetes(), [samples.replica(externalKey=key)]),
                stack=stack_label,
            )
            if o["kind"] == "Service"
        ]
        live["Service"][service["metadata"]["name"]] = service["metadata"] | {"uid": uid}
    deleted = judge(render(config, stack=stack_label), live).doomed()
    engine = stack_result("up", "s", render(config, stack=None), events)
    result = with_deletions(engine, deleted)
    orphan = KeyChange(
        "orphan",
        "delete",
        (ObjectChange("Service", naming.object_name("orphan"), "delete", uid="s5"),),
    )
    assert result.replicas == (*engine.replicas, orphan)
    assert [r.external_key for r in result.replicas] == ["kept", "gone", "orphan"]
    assert result.summary == Summary(add=0, change=0, destroy=2, same=1)
    noop = unchanged("up", "s", render(config, stack=None), Applied(config.replicas, {}))
    assert with_deletions(noop, deleted[1:]).replicas == (*noop.replicas, orphan)


def test_a_carried_key_whose_steps_were_not_read_is_same_with_its_applied_objects() -> None:
    applied = {
        "kept": (
            AppliedObject("Deployment", naming.object_name("kept"), "d1", 1),
            AppliedObject("Service", naming.object_name("kept"), "s1", None),
        ),
        # A key whose steps were read after all: its steps decide, not what was applied.
        "changed": (AppliedObject("Deployment", naming.object_name("changed"), "d9", 1),),
    }
    events = [
        *both("update", "changed", "Deployment", old_uid="d2", new_uid="d2", diffs=["spec"]),
        *both("same", "changed", "Service", old_uid="s2", new_uid="s2"),
        *both("create", "added", "Deployment", old=False, new_uid="d3"),
        *both("create", "added", "Service", old=False, new_uid="s3"),
    ]
    result = stack_result("up", "s", render(CONFIG, stack=None), events, kept=applied)
    without = stack_result("up", "s", render(CONFIG, stack=None), events)
    kept = result.replica("kept")
    assert kept == KeyChange(
        "kept",
        "same",
        (
            ObjectChange("Deployment", naming.object_name("kept"), "same", uid="d1"),
            ObjectChange("Service", naming.object_name("kept"), "same", uid="s1"),
        ),
        resource_id=naming.resource_id(CONFIG.kubernetes, "kept"),
        endpoint=workloads.endpoint(CONFIG.kubernetes, CONFIG.replicas[0]),
    )
    assert result.replicas[1:] == without.replicas[1:]
    assert result.summary == Summary(add=1, change=1, destroy=0, same=1)
