"""Observation: exactly-ours objects grouped per key, typed, with the readiness rule applied."""

from __future__ import annotations

import copy
from typing import Any

from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.cluster.observe import (
    Condition,
    ObservedObject,
    ReplicaObservation,
    Replicas,
    observe,
)
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.kinds import DEPLOYMENT, INFERENCE_SERVICE, POD, SERVICE
from tests.unit import samples
from tests.unit.fake_cluster import NS, FakeTransport, config

SELECTOR = "app.kubernetes.io/managed-by=infercrane,app.kubernetes.io/name=infercrane-runtime"
NAME = naming.object_name("dep-7-r0")


def served(items: dict[Any, list[dict[str, Any]]], pods: Response | None = None) -> FakeTransport:
    answers = {
        ("GET", kind.collection(NS)): Response(200, {"items": copy.deepcopy(found)})
        for kind, found in items.items()
    }
    answers[("GET", POD.collection(NS))] = pods or Response(403, {"reason": "Forbidden"})
    return FakeTransport(answers)


def test_stack_keys_come_first_then_exactly_ours_strays_as_orphaned() -> None:
    ours = workloads.stack_objects(config())
    stray = workloads.stack_objects(
        parse_stack_config(samples.kubernetes(), [samples.replica(externalKey="gone")])
    )
    foreign = copy.deepcopy(ours[0])
    foreign["metadata"]["labels"]["infercrane.dev/external-key-hash"] = "f" * 24
    transport = served({DEPLOYMENT: [ours[0], stray[0], foreign], SERVICE: [ours[1], stray[1]]})
    found = observe(Cluster(transport), config())
    assert [(o.external_key, o.state, len(o.objects)) for o in found] == [
        ("dep-7-r0", "provisioning", 2),
        ("gone", "orphaned", 2),
    ]
    assert {q["labelSelector"] for _, _, q in transport.requests} == {SELECTOR}


def test_each_object_is_reported_with_identity_generation_replicas_and_conditions() -> None:
    deployment, service = workloads.stack_objects(config())
    deployment["metadata"] |= {
        "uid": "u-1",
        "generation": 3,
        "managedFields": [
            {"manager": "infercrane-provider-v1", "operation": "Apply"},
            {"manager": "kube-controller-manager", "operation": "Update"},
        ],
    }
    deployment["status"] = {
        "observedGeneration": 2,
        "updatedReplicas": 0,
        "availableReplicas": 0,
        "conditions": [
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "m"}
        ],
    }
    service["metadata"]["uid"] = "u-2"
    [found] = observe(Cluster(served({DEPLOYMENT: [deployment], SERVICE: [service]})), config())
    assert found == ReplicaObservation(
        external_key="dep-7-r0",
        state="provisioning",
        reason="generation 3 not yet observed by its controller",
        endpoint=f"http://{NAME}.{NS}.svc:8000",
        objects=(
            ObservedObject(
                kind="Deployment",
                name=NAME,
                uid="u-1",
                generation=3,
                observed_generation=2,
                replicas=Replicas(desired=1, updated=0, ready=0, available=0),
                conditions=(Condition("Progressing", "True", "ReplicaSetUpdated", "m"),),
                field_managers=(
                    "infercrane-provider-v1(Apply)",
                    "kube-controller-manager(Update)",
                ),
            ),
            ObservedObject(
                kind="Service",
                name=NAME,
                uid="u-2",
                generation=None,
                observed_generation=None,
                replicas=None,
                conditions=(),
                field_managers=(),
            ),
        ),
    )


def test_a_missing_object_is_degraded_and_no_object_is_absent() -> None:
    deployment, _ = workloads.stack_objects(config())
    stack = parse_stack_config(
        samples.kubernetes(), [samples.replica(), samples.replica(externalKey="never-applied")]
    )
    found = observe(Cluster(served({DEPLOYMENT: [deployment], SERVICE: []})), stack)
    assert [(o.external_key, o.state, o.reason) for o in found] == [
        ("dep-7-r0", "degraded", "missing: Service; the next up recreates it"),
        ("never-applied", "absent", "no object of this key exists"),
    ]


def test_observe_one_key_reads_only_that_key() -> None:
    stack = parse_stack_config(
        samples.kubernetes(), [samples.replica(), samples.replica(externalKey="other")]
    )
    objects = workloads.stack_objects(stack)
    transport = served({DEPLOYMENT: objects[::2], SERVICE: objects[1::2]})
    assert [o.external_key for o in observe(Cluster(transport), stack, ["other"])] == ["other"]


def test_readable_pods_explain_provisioning_and_only_the_keys_own_pods_count() -> None:
    deployment, service = workloads.stack_objects(config())
    pending: dict[str, Any] = {
        "metadata": {"labels": naming.labels("dep-7-r0")},
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "x",
                }
            ]
        },
    }
    elsewhere = copy.deepcopy(pending)
    elsewhere["metadata"]["labels"] = naming.labels("other")
    elsewhere["status"]["conditions"][0]["message"] = "not ours"
    pods = Response(200, {"items": [elsewhere, pending]})
    transport = served({DEPLOYMENT: [deployment], SERVICE: [service]}, pods)
    [found] = observe(Cluster(transport), config())
    assert (found.state, found.reason) == ("provisioning", "Unschedulable: x")


def test_kserve_endpoint_comes_from_the_status_address_when_present() -> None:
    [isvc] = workloads.stack_objects(config(workloadApi="kserve"))
    isvc["status"] = {"address": {"url": f"http://{NAME}-predictor.{NS}.svc.cluster.local"}}
    [found] = observe(Cluster(served({INFERENCE_SERVICE: [isvc]})), config(workloadApi="kserve"))
    assert found.endpoint == f"http://{NAME}-predictor.{NS}.svc.cluster.local"


def test_a_requested_key_outside_the_stack_is_absent_or_orphaned() -> None:
    stray = workloads.stack_objects(
        parse_stack_config(samples.kubernetes(), [samples.replica(externalKey="left-over")])
    )
    transport = served({DEPLOYMENT: stray[:1], SERVICE: stray[1:]})
    found = observe(Cluster(transport), config(), ["removed", "left-over"])
    assert [(o.external_key, o.state, len(o.objects)) for o in found] == [
        ("removed", "absent", 0),
        ("left-over", "orphaned", 2),
    ]
