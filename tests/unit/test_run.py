"""The run path's decisions before the engine starts, over one snapshot of the namespace, and
what a failed engine run means."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infercrane_pulumi.automation import targets
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.failures import failed
from infercrane_pulumi.automation.planning import Operation, Plan, plan_run
from infercrane_pulumi.automation.policypack import PolicyPack
from infercrane_pulumi.automation.run import RunOptions, run
from infercrane_pulumi.automation.state.holders import Held
from infercrane_pulumi.cluster import client, ownership, placement
from infercrane_pulumi.cluster.actions import Doomed
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.config.kubeconfigs import ClusterIdentity
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import (
    BackendUnavailableError,
    ConfigError,
    InferCraneError,
    OwnershipError,
    PolicyViolationError,
    RunFailedError,
)
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.naming import object_name
from infercrane_pulumi.program import handoff
from infercrane_pulumi.program.components import PLUGIN_VERSION
from infercrane_pulumi.program.handoff import Carried
from infercrane_pulumi.program.records import Applied, AppliedObject, ClusterRecord
from infercrane_pulumi.review import changes
from infercrane_pulumi.review.changes import Left
from tests.unit import samples
from tests.unit.fake_cluster import NS, Deleting, FakeTransport, live_copy

OURS = [("infercrane-provider-v1", "Apply")]
STUB = SimpleNamespace(name="s1")  # a stack of which a refused run reads only its name
ENV = PulumiEnvironment(
    state_dir=Path("/nonexistent/state"),
    pulumi_home=Path("/nonexistent/home"),
    passphrase="p",
    kubeconfig=Path("/nonexistent/kubeconfig"),
)
HELD = Held("s1", None, ENV)  # a stack held without a lease (the file backend)
SERVER = ClusterIdentity.of("https://api.example:6443", b"the cluster's CA")
LISTS = [
    ("GET", f"/apis/apps/v1/namespaces/{NS}/deployments", {"limit": "500"}),
    ("GET", f"/api/v1/namespaces/{NS}/services", {"limit": "500"}),
    # The other workload API's kind, whose objects the stack may still hold: not served here.
    ("GET", "/apis/serving.kserve.io/v1beta1", {}),
]


STACK = naming.stack_identity("infercrane", "s1")


def stack(*keys: str) -> StackConfig:
    return parse_stack_config(samples.kubernetes(), [samples.replica(externalKey=k) for k in keys])


def applied(config: StackConfig) -> list[dict[str, Any]]:
    """The live objects ``config``'s apply by stack ``STACK`` left (each with a uid and
    generation 1)."""
    objects = [live_copy(obj, OURS) for obj in workloads.stack_objects(config, stack=STACK)]
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
    records = {
        i.external_key: {"intent": i.model_dump(mode="json", by_alias=True)}
        for i in config.replicas
    }
    return Applied(
        config.replicas,
        {k: tuple(v) for k, v in objects.items()},
        settings=config.kubernetes,
        records=records,
    )


def run_plan(
    cluster: Cluster, operation: Operation, config: StackConfig, recorded: Applied, **given: Any
) -> Plan:
    """``plan_run`` of ``config``'s objects as the stack ``STACK`` renders them (a destroy's:
    none, as ``run`` renders them)."""
    desired = (
        config
        if operation != "destroy"
        else config.model_copy(update={"replicas": (), "allow_empty": True})
    )
    return plan_run(cluster, operation, workloads.render(desired, stack=STACK), recorded, **given)


def dry_runs(transport: FakeTransport) -> list[str]:
    return [path for method, path, _ in transport.requests if method == "PATCH"]


def test_a_verified_no_op_reads_the_namespace_once_and_skips_the_engine() -> None:
    config = stack("a", "b")
    transport = FakeTransport(live=applied(config))
    plan = run_plan(Cluster(transport), "up", config, record(config), refresh=False)
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
    cluster = Cluster(transport, identity=SERVER)
    plan = run_plan(
        cluster,
        operation,
        config,
        record(config, uids=uids),
        refresh=refresh,
        exclusive=exclusive,
    )
    assert transport.requests[:3] == LISTS
    assert len(dry_runs(transport)) == 4 and len(transport.requests) == 7
    assert not plan.unchanged and plan.flags == ("--refresh",) * refresh
    assert plan.checked == handoff.Checked(handoff.digest(config), SERVER)


def test_an_object_gone_out_of_band_asks_for_a_refresh_and_a_caller_may_force_one() -> None:
    config = stack("a")
    live = [obj for obj in applied(config) if obj["kind"] == "Deployment"]
    gone = run_plan(Cluster(FakeTransport(live=live)), "up", config, record(config), refresh=False)
    assert (gone.unchanged, gone.flags) == (False, ("--refresh",))
    forced = run_plan(
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
        run_plan(Cluster(transport), "up", desired, record(last), refresh=False)
    assert refused.value.problems == (
        f"{impostor['kind']}/{NS}/{object_name('removed')}: exists but is not exactly ours "
        "(managed-by, key-hash label and key annotation must all match); InferCrane never "
        "adopts, changes or deletes it",
    )
    assert dry_runs(transport) == []


def doomed(live: list[dict[str, Any]]) -> tuple[Doomed, ...]:
    """What deleting ``live`` objects looks like: each named, with its uid, by kind then name."""
    found = [
        (
            {
                "apiVersion": "apps/v1" if obj["kind"] == "Deployment" else "v1",
                "kind": obj["kind"],
                "metadata": {
                    "name": obj["metadata"]["name"],
                    "namespace": NS,
                    "annotations": {naming.ANNOTATION_EXTERNAL_KEY: changes.external_key(obj)},
                },
            },
            obj["metadata"]["uid"],
        )
        for obj in live
    ]
    return tuple(sorted(found, key=lambda item: (item[0]["kind"], item[0]["metadata"]["name"])))


def of_key(live: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return [obj for obj in live if obj["metadata"]["name"] == object_name(key)]


def test_a_destroy_checks_ownership_then_deletes_each_object_by_the_uid_it_checked() -> None:
    config = stack("a")
    live = applied(config)
    transport = FakeTransport(live=live)
    plan = run_plan(Cluster(transport), "destroy", config, record(config), refresh=True)
    assert transport.requests == LISTS
    why = "delete: this stack's, and no desired key's"
    reasons = {
        key: tuple(
            f"{obj['kind']}/{NS}/{obj['metadata']['name']}: {why}" for obj in of_key(live, key)
        )
        for key in ("a",)
    }
    assert plan == type(plan)(flags=(), deletions=doomed(live), reasons=reasons)
    held = run_plan(
        Cluster(transport),
        "destroy",
        config,
        record(config),
        refresh=False,
        exclusive=False,
    )
    assert held.deletions == ()  # another operation holds the stack: it may be applying them
    foreign = copy.deepcopy(applied(config))
    foreign[1]["metadata"]["annotations"]["infercrane.dev/external-key"] = "someone-else"
    with pytest.raises(OwnershipError):
        run_plan(
            Cluster(FakeTransport(live=foreign)),
            "destroy",
            config,
            record(config),
            refresh=False,
        )


def test_what_a_dead_run_created_for_an_undesired_key_is_deleted_without_the_engine() -> None:
    """A run that died created key b's objects and recorded nothing: the next run of the same
    stack (otherwise a verified no-op, or a stack emptied of intents on purpose) deletes exactly
    them; objects of the same shape carrying another stack's identity are never touched."""
    kept = stack("a")
    stray = applied(stack("b"))
    other = applied(stack("c"))
    for obj in other:
        obj["metadata"]["labels"][naming.LABEL_STACK] = naming.stack_identity("infercrane", "s2")
    transport = FakeTransport(live=applied(kept) + stray + other)
    plan = run_plan(Cluster(transport), "up", kept, record(kept), refresh=False)
    assert (plan.unchanged, plan.deletions) == (True, doomed(stray))
    emptied = run_plan(
        Cluster(FakeTransport(live=stray + other)),
        "up",
        stack().model_copy(update={"allow_empty": True}),
        Applied(),
        refresh=False,
    )
    assert emptied.deletions == doomed(stray)
    preview = run_plan(
        Cluster(FakeTransport(live=stray)), "preview", kept, Applied(), refresh=False
    )
    assert preview.deletions == ()  # a preview deletes nothing


def test_a_removal_after_a_dead_run_deletes_its_key_and_leaves_the_others_saying_so() -> None:
    """Issue 49: a run that died created the objects of r0, r1 and r2 and recorded nothing; a
    ``remove("r0")`` (an up of what the stack recorded, none, naming r0) deletes r0's alone
    and reports each object of r1 and r2 as left, with why."""
    made = applied(stack("r0", "r1", "r2"))
    plan = run_plan(
        Cluster(FakeTransport(live=made)),
        "up",
        stack(),
        Applied(),
        refresh=False,
        named=frozenset({"r0"}),
    )
    assert plan.deletions == doomed(of_key(made, "r0"))
    why = (
        "key {} is not desired by the stack's record, nor named by this run (a stopped run's "
        "object?): left for the next ensure to decide"
    )
    assert set(plan.left) == {
        Left(key, obj["kind"], obj["metadata"]["name"], why.format(key))
        for key in ("r1", "r2")
        for obj in of_key(made, key)
    }
    assert len(plan.left) == 4


def test_an_unmarked_object_is_deleted_only_when_the_stacks_record_holds_its_key() -> None:
    """Objects applied before objects carried their stack's identity: a removed key's are the
    stack's by its record; an unmarked object of a key the stack never recorded is not."""
    before, after = stack("a", "b"), stack("a")
    live = applied(before) + applied(stack("z"))
    for obj in live:
        del obj["metadata"]["labels"][naming.LABEL_STACK]
    plan = run_plan(Cluster(FakeTransport(live=live)), "up", after, record(before), refresh=False)
    assert plan.deletions == doomed(of_key(live, "b"))


def test_removing_a_key_whose_object_is_gone_refreshes_and_works_on_every_key() -> None:
    """A refresh drops what is gone from the state, and a resource not in the state cannot be
    targeted: the refreshing run is not targeted."""
    before, after = stack("a", "b"), stack("a")
    live = [o for o in applied(before) if o not in of_key(applied(before), "b")[1:]]
    plan = run_plan(Cluster(FakeTransport(live=live)), "up", after, record(before), refresh=False)
    assert (plan.flags, plan.targets) == (("--refresh",), None)
    assert plan.deletions == doomed(of_key(live, "b"))


def test_one_key_added_to_a_verified_stack_is_the_only_one_checked_and_worked_on() -> None:
    before, after = stack("a", "b"), stack("a", "b", "c")
    transport = FakeTransport(live=applied(before))
    plan = run_plan(Cluster(transport), "up", after, record(before), refresh=False)
    assert (plan.unchanged, plan.targets) == (False, frozenset({"c"}))
    assert dry_runs(transport) == [
        f"/apis/apps/v1/namespaces/{NS}/deployments/{object_name('c')}",
        f"/api/v1/namespaces/{NS}/services/{object_name('c')}",
    ]


def planned(
    config: StackConfig, recorded: Applied, live: list[dict[str, Any]], *, refresh: bool = False
) -> Plan:
    """The plan of an ``up`` of ``config`` over ``live``, the stack having applied
    ``recorded``."""
    return run_plan(Cluster(FakeTransport(live=live)), "up", config, recorded, refresh=refresh)


def test_the_verified_keys_are_carried_so_the_program_registers_only_the_worked_on_key() -> None:
    before, after = stack("a", "b"), stack("a", "b", "c")
    recorded = record(before)
    plan = planned(after, recorded, applied(before))
    assert plan.carried == Carried.of(after, {k: recorded.records[k] for k in ("a", "b")})
    assert plan.checked is not None and plan.carried.digest == plan.checked.digest


def test_nothing_is_carried_when_the_providers_settings_changed() -> None:
    """Another context (the same cluster's objects, so every key verifies) replaces the
    provider, and every resource under it with it: every key is registered."""
    before, after = stack("a", "b"), stack("a", "b", "c")
    moved = after.model_copy(
        update={"kubernetes": after.kubernetes.model_copy(update={"context": "other"})}
    )
    plan = planned(moved, record(before), applied(before))
    assert (plan.targets, plan.carried) == (frozenset({"c"}), None)


def test_a_settings_only_change_is_a_change_to_make_not_drift_to_refresh() -> None:
    """What the stack applied was marked with the settings it was applied with: a new image
    digest alone once read as every object carrying another intent than the one applied, and
    the run refreshed the whole stack (issue 62). An object that does carry another one is
    still drift."""
    before = stack("a", "b")
    digest = f"registry.example/vllm/vllm-openai@sha256:{'ef' * 32}"
    after = before.model_copy(
        update={"kubernetes": before.kubernetes.model_copy(update={"image_digest": digest})}
    )
    live = applied(before)
    assert planned(after, record(before), live).flags == ()
    live[0]["metadata"]["annotations"]["infercrane.dev/intent-hash"] = "sha256:" + "0" * 64
    assert planned(after, record(before), live).flags == ("--refresh",)


def test_nothing_is_carried_when_every_key_goes_to_the_engine() -> None:
    """A refreshing run, or one with nothing verified, is not targeted: an unregistered key
    would be forgotten."""
    config = stack("a", "b")
    plans = [
        planned(config, record(config), applied(config), refresh=True),
        planned(config, record(config, uids=False), applied(config)),
    ]
    assert [(p.targets, p.carried) for p in plans] == [(None, None), (None, None)]


def test_a_removed_key_is_worked_on_and_nothing_else_is_dry_run() -> None:
    before, after = stack("a", "b"), stack("a")
    transport = FakeTransport(live=applied(before))
    plan = run_plan(Cluster(transport), "up", after, record(before), refresh=False)
    assert (plan.targets, dry_runs(transport)) == (frozenset({"b"}), [])
    assert plan.deletions == doomed(of_key(applied(before), "b"))


def test_nothing_verified_means_no_targets_every_key_goes_to_the_engine() -> None:
    config = stack("a", "b")
    transport = FakeTransport(live=applied(config))
    plan = run_plan(Cluster(transport), "up", config, record(config, uids=False), refresh=False)
    assert plan.targets is None and len(dry_runs(transport)) == 4


def test_targets_name_each_keys_component_and_objects_never_the_stack_or_its_provider() -> None:
    """The engine always works on the stack and its provider; naming either would make every
    resource under it a target, deleted when the program leaves it out."""
    settings = stack().kubernetes
    name = object_name("c")
    assert list(
        targets.owners(project="infercrane", stack="s1", settings=settings, keys=["c"])
    ) == [
        f"urn:pulumi:s1::infercrane::infercrane:kubernetes:Replica::{name}",
        f"urn:pulumi:s1::infercrane::infercrane:kubernetes:Replica$kubernetes:apps/v1:Deployment::{name}-deployment",
        f"urn:pulumi:s1::infercrane::infercrane:kubernetes:Replica$kubernetes:core/v1:Service::{name}-service",
    ]


@pytest.mark.parametrize(
    ("diagnostics", "finished", "expected"),
    [
        (
            [],
            True,
            BackendUnavailableError(
                "stack s1: pulumi up ran every step but could not record them in the backend; "
                "try again"
            ),
        ),
        ([], False, RunFailedError("stack s1: pulumi up failed")),
        (
            ["error: a step failed", "error: a step failed", ""],
            True,
            RunFailedError("error: a step failed"),
        ),
        (
            [
                "cannot reach postgres://infercrane:hunter2@db:5432/state",
                "401 with Authorization: Bearer eyJhbGciOi.abc-123",
                "config token=abc123, password: s3cr3t",
            ],
            False,
            RunFailedError(
                [
                    "cannot reach postgres://***@db:5432/state",
                    "401 with Authorization: Bearer ***",
                    "config token=***, password: ***",
                ]
            ),
        ),
    ],
    ids=["finished, no error: the state write", "nothing ran", "the engine's errors", "masked"],
)
def test_a_failed_engine_run_is_classified_from_its_events(
    diagnostics: list[str], finished: bool, expected: InferCraneError
) -> None:
    error = failed("s1", "up", diagnostics, finished=finished)
    assert (type(error), error.problems) == (type(expected), expected.problems)


@pytest.mark.parametrize("operation", ["up", "preview"])
def test_a_mandatory_policy_violation_refuses_before_the_cluster_is_touched(
    operation: Operation, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_cluster(*_: Any) -> Any:
        raise AssertionError("the cluster was touched")

    monkeypatch.setattr(client, "connect", no_cluster)
    config = parse_stack_config(
        samples.kubernetes(), [samples.replica()], {"gpuProducts": ["NVIDIA-L4"]}
    )
    with pytest.raises(PolicyViolationError) as refused:
        run(STUB, ENV, operation, config, held=HELD)  # type: ignore[arg-type]
    assert refused.value.problems == (
        "dep-7-r0: GPU product NVIDIA-L40S is not allowed here (allowed: NVIDIA-L4)",
    )


@pytest.mark.parametrize("operation", ["up", "preview"])
def test_a_policy_pack_the_engine_could_not_run_refuses_before_the_cluster_is_touched(
    operation: Operation, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def no_cluster(*_: Any) -> Any:
        raise AssertionError("the cluster was touched")

    monkeypatch.setattr(client, "connect", no_cluster)
    config = parse_stack_config(samples.kubernetes(), [samples.replica()])
    options = RunOptions(policy_pack=PolicyPack(tmp_path))
    with pytest.raises(ConfigError) as refused:
        run(STUB, ENV, operation, config, held=HELD, options=options)  # type: ignore[arg-type]
    assert refused.value.problems == (
        f"policy pack {tmp_path}: no PulumiPolicy.yaml naming a Python virtualenv",
    )


EMPTYING = (
    "infercrane:replicas: empty, so this run would delete every replica of the stack (a, b); "
    "set infercrane:allowEmpty: true to empty the namespace on purpose, or run destroy"
)


@pytest.mark.parametrize("operation", ["up", "preview"])
@pytest.mark.parametrize("caller", ["driver", "driver without a record", "person"])
def test_an_empty_desired_set_never_takes_a_namespace_down_by_surprise(
    operation: Operation, caller: str
) -> None:
    """No replicas wanted while the stack holds two: refused in one line before any write,
    whether the stack's record is known (a driver) or not, and by the program a person runs
    (``ownership.guard``, the same verdict); on purpose, both are deleted."""
    live = applied(stack("a", "b"))
    recorded = record(stack("a", "b")) if caller == "driver" else Applied()

    def deletes(config: StackConfig) -> tuple[Doomed, ...] | list[str]:
        transport = Deleting(live=live)
        if caller == "person":
            rendered = workloads.render(config, stack=STACK)
            ownership.guard(Cluster(transport), rendered, deleting=operation == "up")
            return [path for method, path, _ in transport.requests if method == "DELETE"]
        return run_plan(Cluster(transport), operation, config, recorded, refresh=False).deletions

    with pytest.raises(ConfigError) as refused:
        deletes(stack())
    assert refused.value.problems == (EMPTYING,)
    on_purpose = deletes(stack().model_copy(update={"allow_empty": True}))
    assert len(on_purpose) == (len(live) if operation == "up" else 0)


def test_a_destroy_a_removal_of_the_last_key_and_an_empty_new_stack_need_no_allow_empty() -> None:
    """Each says what it deletes by itself: a destroy the whole stack, a ``remove`` its key; a
    stack that holds nothing deletes nothing."""
    live = applied(stack("a"))
    destroyed = run_plan(
        Cluster(FakeTransport(live=live)), "destroy", stack("a"), record(stack("a")), refresh=False
    )
    assert destroyed.deletions == doomed(live)
    removed = run_plan(
        Cluster(FakeTransport(live=live)),
        "up",
        stack(),
        record(stack("a")),
        refresh=False,
        named=frozenset({"a"}),
    )
    assert removed.deletions == doomed(live)
    fresh = run_plan(Cluster(FakeTransport(live=[])), "up", stack(), Applied(), refresh=False)
    assert fresh.deletions == ()


@pytest.mark.parametrize("operation", ["up", "destroy"])
def test_without_the_plugin_a_run_that_needs_the_engine_is_refused_before_any_write(
    operation: Operation, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A destroy deletes before its engine forgets the objects: not one of them either."""
    config = stack("a", "b")
    transport = Deleting(live=applied(config))
    monkeypatch.setattr(client, "connect", lambda *_: Cluster(transport, identity=SERVER))
    where = ClusterRecord(SERVER.server, SERVER.certificate_authority, None)
    monkeypatch.setattr(placement, "reached", lambda *_: where)  # not from a kubeconfig file
    changed = config if operation == "destroy" else stack("a", "b", "c")
    with pytest.raises(ConfigError) as refused:
        run(STUB, ENV, operation, changed, held=HELD, applied=record(config))  # type: ignore[arg-type]
    assert refused.value.problems == (
        f"pulumi-resource-kubernetes {PLUGIN_VERSION}: not installed in "
        "/nonexistent/home/plugins and runs never download one: pulumi plugin install resource "
        f"kubernetes {PLUGIN_VERSION} (with --file <tools bin>/pulumi-resource-kubernetes for "
        "the one hack/tools/build.sh builds)",
    )
    writes = [(method, query) for method, _, query in transport.requests if method != "GET"]
    assert {method for method, _ in writes} <= {"PATCH"}  # no DELETE
    assert all(query["dryRun"] == "All" for _, query in writes)
