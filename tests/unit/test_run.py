"""The run path's decisions before the engine starts, over one snapshot of the namespace."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane_pulumi import preflighted, workloads
from infercrane_pulumi.automation import targets
from infercrane_pulumi.automation.run import Operation, plan_run
from infercrane_pulumi.cluster.client import Cluster
from infercrane_pulumi.cluster.unchanged import Applied, AppliedObject
from infercrane_pulumi.errors import OwnershipError
from infercrane_pulumi.intents import StackConfig, parse_stack_config
from infercrane_pulumi.naming import object_name
from tests.unit import samples
from tests.unit.fake_cluster import NS, FakeTransport, live_copy

OURS = [("infercrane-provider-v1", "Apply")]
LISTS = [
    ("GET", f"/apis/apps/v1/namespaces/{NS}/deployments", {"limit": "500"}),
    ("GET", f"/api/v1/namespaces/{NS}/services", {"limit": "500"}),
]


def stack(*keys: str) -> StackConfig:
    return parse_stack_config(samples.kubernetes(), [samples.replica(externalKey=k) for k in keys])


def applied(config: StackConfig) -> list[dict[str, Any]]:
    """The live objects ``config``'s apply left (each with a uid and generation 1)."""
    objects = [live_copy(obj, OURS) for obj in workloads.stack_objects(config)]
    for obj in objects:
        obj["metadata"] |= {"uid": f"uid-{obj['kind']}-{obj['metadata']['name']}", "generation": 1}
    return objects


def record(config: StackConfig, *, uids: bool = True) -> Applied:
    """What the stack's outputs say of ``config``'s apply (``uids=False``: an older release's
    outputs, which lack the record)."""
    objects: dict[str, list[AppliedObject]] = {}
    for obj in applied(config):
        meta = obj["metadata"]
        key = meta["annotations"]["infercrane.dev/external-key"]
        uid, generation = (meta["uid"], 1) if uids else (None, None)
        objects.setdefault(key, []).append(
            AppliedObject(obj["kind"], meta["name"], uid, generation)
        )
    return Applied(config.replicas, {k: tuple(v) for k, v in objects.items()})


def dry_runs(transport: FakeTransport) -> list[str]:
    return [path for method, path, _ in transport.requests if method == "PATCH"]


def test_a_verified_no_op_reads_the_namespace_once_and_skips_the_engine() -> None:
    config = stack("a", "b")
    transport = FakeTransport(live=applied(config))
    plan = plan_run(Cluster(transport), "up", config, record(config), refresh=False)
    assert (plan.unchanged, transport.requests) == (True, LISTS)


@pytest.mark.parametrize(
    ("operation", "refresh", "exclusive", "uids"),
    [
        ("up", True, True, True),
        ("up", False, False, True),
        ("up", False, True, False),
        ("preview", False, True, False),
    ],
    ids=["refresh asked", "stack held elsewhere", "no record (older release)", "preview"],
)
def test_otherwise_an_unchanged_stack_is_read_once_dry_run_and_goes_to_the_engine(
    operation: Operation, refresh: bool, exclusive: bool, uids: bool
) -> None:
    config = stack("a", "b")
    transport = FakeTransport(live=applied(config))
    cluster = Cluster(transport)
    plan = plan_run(
        cluster, operation, config, record(config, uids=uids), refresh=refresh, exclusive=exclusive
    )
    assert transport.requests[:2] == LISTS
    assert len(dry_runs(transport)) == 4 and len(transport.requests) == 6
    assert not plan.unchanged and plan.flags == ("--refresh",) * refresh
    assert plan.variables == {preflighted.PREFLIGHTED_ENV: preflighted.digest(config)}


def test_an_object_gone_out_of_band_asks_for_a_refresh_and_a_caller_may_force_one() -> None:
    config = stack("a")
    live = [obj for obj in applied(config) if obj["kind"] == "Deployment"]
    gone = plan_run(Cluster(FakeTransport(live=live)), "up", config, record(config), refresh=False)
    assert (gone.unchanged, gone.flags) == (False, ("--refresh",))
    forced = plan_run(
        Cluster(FakeTransport(live=applied(config))),
        "preview",
        config,
        record(config),
        refresh=True,
    )
    assert forced.flags == ("--refresh",)


def test_a_look_alike_in_place_of_a_removed_key_is_refused_before_any_dry_run() -> None:
    last, desired = stack("kept", "removed"), stack("kept")
    live = applied(last)
    impostor = next(o for o in live if o["metadata"]["name"] == object_name("removed"))
    impostor["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "helm"
    transport = FakeTransport(live=live)
    with pytest.raises(OwnershipError) as refused:
        plan_run(Cluster(transport), "up", desired, record(last), refresh=False)
    assert refused.value.problems == (
        f"{impostor['kind']}/{NS}/{object_name('removed')}: exists but is not exactly ours "
        "(managed-by, key-hash label and key annotation must all match); InferCrane never "
        "adopts, changes or deletes it",
    )
    assert dry_runs(transport) == []


def test_a_destroy_checks_ownership_then_deletes_each_object_by_the_uid_it_checked() -> None:
    config = stack("a")
    live = applied(config)
    transport = FakeTransport(live=live)
    plan = plan_run(Cluster(transport), "destroy", config, record(config), refresh=True)
    assert transport.requests == LISTS
    objects = workloads.stack_objects(config)
    uids = [obj["metadata"]["uid"] for obj in live]
    assert plan == type(plan)(
        flags=(), variables={}, deletions=tuple(zip(objects, uids, strict=True))
    )
    held = plan_run(
        Cluster(transport), "destroy", config, record(config), refresh=False, exclusive=False
    )
    assert held.deletions == ()  # another operation holds the stack: the engine deletes
    foreign = copy.deepcopy(applied(config))
    foreign[1]["metadata"]["annotations"]["infercrane.dev/external-key"] = "someone-else"
    with pytest.raises(OwnershipError):
        plan_run(
            Cluster(FakeTransport(live=foreign)), "destroy", config, record(config), refresh=False
        )


def test_an_empty_stack_never_reads_the_cluster() -> None:
    transport = FakeTransport()
    plan = plan_run(Cluster(transport), "up", stack(), Applied(), refresh=False)
    assert (transport.requests, plan.flags, plan.variables) == ([], (), {})


def test_one_key_added_to_a_verified_stack_is_the_only_one_checked_and_worked_on() -> None:
    before, after = stack("a", "b"), stack("a", "b", "c")
    transport = FakeTransport(live=applied(before))
    plan = plan_run(Cluster(transport), "up", after, record(before), refresh=False)
    assert (plan.unchanged, plan.targets) == (False, frozenset({"c"}))
    assert dry_runs(transport) == [
        f"/apis/apps/v1/namespaces/{NS}/deployments/{object_name('c')}",
        f"/api/v1/namespaces/{NS}/services/{object_name('c')}",
    ]


def test_a_removed_key_is_worked_on_and_nothing_else_is_dry_run() -> None:
    before, after = stack("a", "b"), stack("a")
    transport = FakeTransport(live=applied(before))
    plan = plan_run(Cluster(transport), "up", after, record(before), refresh=False)
    assert (plan.targets, dry_runs(transport)) == (frozenset({"b"}), [])


def test_nothing_verified_means_no_targets_every_key_goes_to_the_engine() -> None:
    config = stack("a", "b")
    transport = FakeTransport(live=applied(config))
    plan = plan_run(Cluster(transport), "up", config, record(config, uids=False), refresh=False)
    assert plan.targets is None and len(dry_runs(transport)) == 4


def test_targets_name_the_stack_its_provider_and_each_keys_component_and_objects() -> None:
    settings = stack().kubernetes
    name = object_name("c")
    assert targets.urns(project="infercrane", stack="s1", settings=settings, keys=["c"]) == [
        "urn:pulumi:s1::infercrane::pulumi:pulumi:Stack::infercrane-s1",
        f"urn:pulumi:s1::infercrane::pulumi:providers:kubernetes::infercrane-{NS}",
        f"urn:pulumi:s1::infercrane::infercrane:kubernetes:Replica::{name}",
        f"urn:pulumi:s1::infercrane::infercrane:kubernetes:Replica$kubernetes:apps/v1:Deployment::{name}-deployment",
        f"urn:pulumi:s1::infercrane::infercrane:kubernetes:Replica$kubernetes:core/v1:Service::{name}-service",
    ]
