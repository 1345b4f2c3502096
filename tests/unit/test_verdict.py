"""One verdict per object: which objects a run keeps, applies, refuses and deletes, and why,
over one snapshot of the namespace, whatever workload API made them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from infercrane_pulumi.cluster.verdict import judge
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.workloads import render
from infercrane_pulumi.program.records import Applied
from tests.unit import samples
from tests.unit.fake_cluster import NS
from tests.unit.test_run import STACK, applied, record, stack

CONFIG = stack("a", "b")
NAME = naming.object_name("a")
DEPLOYMENT = f"Deployment/{NS}/{NAME}"
Live = dict[str, dict[str, dict[str, Any]]]
WHOLE_KEY = "its key goes to the engine for another of its objects"


def snapshot(objects: list[dict[str, Any]]) -> Live:
    """The namespace's metadata as the snapshot reads it: every owned kind listed."""
    found: Live = {kind.kind: {} for kind in workloads.OWNED_KINDS}
    for obj in objects:
        found[obj["kind"]][obj["metadata"]["name"]] = obj["metadata"]
    return found


def deployment_of_a(live: Live) -> dict[str, Any]:
    return live["Deployment"][NAME]


def actions(config: StackConfig, live: Live, **given: Any) -> dict[tuple[str, str], str]:
    found = judge(render(config, stack=STACK), live, **given)
    return {(o.key, o.manifest["kind"]): o.action for o in found.objects}


def test_exactly_what_the_last_apply_left_is_kept() -> None:
    live = snapshot(applied(CONFIG))
    # Status updates and the Deployment controller's own annotation are not changes.
    deployment_of_a(live)["managedFields"].append(
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"}
    )
    deployment_of_a(live)["annotations"]["deployment.kubernetes.io/revision"] = "1"
    found = judge(render(CONFIG, stack=STACK), live, applied=record(CONFIG))
    assert found.kept() == {"a", "b"}
    assert found.reasons() == {"a": (), "b": ()}
    assert (found.refusals(), found.applied(), found.doomed(), found.drift) == ([], [], [], ())


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
        (lambda live: live["Deployment"].pop(NAME), "absent"),
        (_set("generation", value=2), "not the object, or not the spec, the last apply left"),
        (_set("uid", value="replaced"), "not the object, or not the spec, the last apply left"),
        (
            _set("annotations", naming.ANNOTATION_INTENT_HASH, value="sha256:other"),
            "its annotations differ from ours",
        ),
        (
            _set("managedFields", value=[{"manager": "other", "operation": "Update"}]),
            "its field managers changed",
        ),
    ],
    ids=["gone", "spec changed", "replaced", "annotation", "our manager gone"],
)
def test_any_difference_applies_the_whole_key_and_says_why(
    change: Callable[[Live], None], reason: str
) -> None:
    live = snapshot(applied(CONFIG))
    change(live)
    found = judge(render(CONFIG, stack=STACK), live, applied=record(CONFIG))
    assert found.kept() == {"b"}
    service = f"Service/{NS}/{NAME}"
    assert found.reasons() == {
        "a": (f"{DEPLOYMENT}: apply: {reason}", f"{service}: apply: {WHOLE_KEY}"),
        "b": (),
    }


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (
            _set("labels", "app.kubernetes.io/managed-by", value="helm"),
            "exists but is not exactly ours",
        ),
        (
            lambda live: deployment_of_a(live)["managedFields"].append(
                {"manager": "kubectl", "operation": "Update"}
            ),
            "would be silently taken over by pulumi-kubernetes",
        ),
        (
            lambda live: deployment_of_a(live).__setitem__("managedFields", []),
            "has no managedFields, so the provider would force its apply",
        ),
    ],
    ids=["look-alike", "take-over manager", "no managers"],
)
def test_an_object_at_our_name_that_is_not_ours_or_would_be_taken_over_is_refused(
    change: Callable[[Live], None], refusal: str
) -> None:
    live = snapshot(applied(CONFIG))
    change(live)
    found = judge(render(CONFIG, stack=STACK), live, applied=record(CONFIG))
    [problem] = found.refusals()
    assert problem.startswith(f"{DEPLOYMENT}: ") and refusal in problem
    assert found.doomed() == []  # never deleted either


def test_a_changed_intent_a_new_key_an_older_record_or_no_keeping_is_never_kept() -> None:
    live = snapshot(applied(CONFIG))
    edited = parse_stack_config(
        samples.kubernetes(),
        [samples.replica(externalKey="a", modelRevision="r2"), samples.replica(externalKey="b")],
    )
    assert judge(render(edited, stack=STACK), live, applied=record(CONFIG)).kept() == {"b"}
    grown = stack("a", "b", "c")
    assert judge(render(grown, stack=STACK), live, applied=record(CONFIG)).kept() == {"a", "b"}
    older = judge(render(CONFIG, stack=STACK), live, applied=record(CONFIG, uids=False))
    assert older.kept() == set()
    assert [len(why) for why in older.reasons().values()] == [2, 2]
    assert (
        judge(render(CONFIG, stack=STACK), copy.deepcopy(live), applied=Applied()).kept() == set()
    )
    unkept = judge(render(CONFIG, stack=STACK), live, applied=record(CONFIG), keep=False)
    assert unkept.kept() == set() and len(unkept.applied()) == 4


def test_this_stack_s_objects_no_key_wants_are_deleted_by_their_uid_and_nothing_else() -> None:
    kept, removed, killed = stack("a"), stack("a", "gone"), stack("orphan")
    other = [
        *applied(stack("theirs")),  # another stack's identity
        *applied(stack("a-lookalike")),
    ]
    for obj in other:
        obj["metadata"]["labels"][naming.LABEL_STACK] = "another-stack"
    live = snapshot([*applied(removed), *applied(killed), *other])
    found = judge(render(kept, stack=STACK), live, applied=record(removed))
    doomed = sorted((o["kind"], o["metadata"]["name"], uid) for o, uid in found.doomed())
    assert doomed == sorted(
        (kind, naming.object_name(key), f"uid-{kind}-{naming.object_name(key)}")
        for key in ("gone", "orphan")
        for kind in ("Deployment", "Service")
    )
    assert found.refusals() == []


def test_a_removal_deletes_the_key_it_names_and_leaves_a_stopped_run_s_others() -> None:
    """``remove("gone")`` after a stopped run: the stack recorded ``a`` and ``gone``, the
    stopped run left ``orphan`` and ``stray`` (never recorded), and ``stray``'s too is of a key
    the caller names; only the named keys' objects go, the others are left, saying why."""
    recorded = stack("a", "gone")
    live = snapshot([*applied(stack("a", "gone", "orphan", "stray"))])
    found = judge(
        render(stack("a"), stack=STACK),
        live,
        applied=record(recorded),
        named=frozenset({"gone", "stray"}),
    )
    doomed = sorted((o["kind"], o["metadata"]["name"], uid) for o, uid in found.doomed())
    assert doomed == sorted(
        (kind, naming.object_name(key), f"uid-{kind}-{naming.object_name(key)}")
        for key in ("gone", "stray")
        for kind in ("Deployment", "Service")
    )
    assert sorted((o.key, o.manifest["kind"], o.uid) for o in found.left()) == [
        ("orphan", "Deployment", f"uid-Deployment-{naming.object_name('orphan')}"),
        ("orphan", "Service", f"uid-Service-{naming.object_name('orphan')}"),
    ]
    assert {o.reasons for o in found.left()} == {
        (
            "key orphan is not desired by the stack's record, nor named by this run (a stopped "
            "run's object?): left for the next ensure to decide",
        )
    }
    assert found.kept() == {"a"}  # a left object is no key the engine works on


def test_a_look_alike_at_a_removed_key_s_name_is_refused_never_deleted() -> None:
    removed = stack("a", "gone")
    live = snapshot(applied(removed))
    lookalike = live["Service"][naming.object_name("gone")]
    lookalike["labels"][naming.LABEL_MANAGED_BY] = "someone-else"
    found = judge(render(stack("a"), stack=STACK), live, applied=record(removed))
    assert found.refusals() == [
        f"Service/{NS}/{naming.object_name('gone')}: exists but is not exactly ours (managed-by, "
        "key-hash label and key annotation must all match); InferCrane never adopts, changes or "
        "deletes it"
    ]
    assert [o["kind"] for o, _ in found.doomed()] == ["Deployment"]


@pytest.mark.parametrize(("before", "after"), [("deployment", "kserve"), ("kserve", "deployment")])
def test_switching_the_workload_api_deletes_the_other_api_s_objects_of_each_key(
    before: str, after: str
) -> None:
    old = parse_stack_config(samples.kubernetes(workloadApi=before), [samples.replica()])
    new = parse_stack_config(samples.kubernetes(workloadApi=after), [samples.replica()])
    live = snapshot(applied(old))
    found = judge(render(new, stack=STACK), live, applied=record(old))
    old_kinds = {kind.kind for kind in workloads.WORKLOAD_APIS[before].kinds}  # type: ignore[index]
    new_kinds = {kind.kind for kind in workloads.WORKLOAD_APIS[after].kinds}  # type: ignore[index]
    assert {o["kind"] for o, _ in found.doomed()} == old_kinds
    assert {o["kind"] for o in found.applied()} == new_kinds
    assert found.refusals() == []


def test_a_kind_the_stack_applied_that_this_identity_may_not_list_refuses_the_run() -> None:
    old = parse_stack_config(samples.kubernetes(), [samples.replica()])
    new = parse_stack_config(samples.kubernetes(workloadApi="kserve"), [samples.replica()])
    live = snapshot([])
    del live["Deployment"], live["Service"]  # listing them was forbidden
    assert judge(render(new, stack=STACK), live, applied=record(old)).refusals() == [
        f"namespace {NS}: the stack applied {kind} objects (workloadApi deployment) that this "
        f"identity may not list ({resource}); bind that workload API's Role until a run has "
        "deleted them"
        for kind, resource in (("Deployment", "deployments.apps"), ("Service", "services"))
    ]


def test_drift_is_an_applied_object_gone_or_carrying_another_intent() -> None:
    live = snapshot(applied(CONFIG))
    assert judge(render(CONFIG, stack=STACK), live, applied=record(CONFIG)).drift == ()
    del live["Service"][naming.object_name("b")]
    older = parse_stack_config(
        samples.kubernetes(),
        [samples.replica(externalKey="a", modelRevision="old"), samples.replica(externalKey="b")],
    )
    for obj in applied(older):
        if obj["metadata"]["name"] == NAME:
            live[obj["kind"]][NAME] = obj["metadata"]
    found = judge(render(CONFIG, stack=STACK), live, applied=record(CONFIG))
    assert found.drift == (
        f"Deployment/{NS}/{NAME}: carries another intent than the one applied",
        f"Service/{NS}/{NAME}: carries another intent than the one applied",
        f"Service/{NS}/{naming.object_name('b')}: gone",
    )
    # Keys the stack never applied are no drift.
    assert judge(render(stack("a", "b", "c"), stack=STACK), snapshot(applied(CONFIG))).drift == ()
