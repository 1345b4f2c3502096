"""The ownership preflight's decisions, driven through a recorded fake transport."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infercrane_pulumi.cluster import client, ownership, preflight, verdict
from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.config.kubeconfigs import ClusterIdentity
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import (
    ClusterUnavailableError,
    ConfigError,
    OwnershipError,
    RejectedError,
)
from infercrane_pulumi.hand_run import ownership_preflight
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.kinds import DEPLOYMENT, INFERENCE_SERVICE
from infercrane_pulumi.program import handoff
from infercrane_pulumi.program.program import judged, served
from tests.unit import samples
from tests.unit.fake_cluster import NS, FakeTransport, config, live_copy
from tests.unit.test_run import LISTS, STACK

KSERVE_CRD = Path(__file__).parent.parent / "fixtures" / "kserve-inferenceservice-crd.yaml"


def check_before_apply(cluster: Cluster, config: StackConfig) -> None:
    """The ownership rule as a program run by hand runs it for a preview."""
    ownership.guard(cluster, workloads.render(config, stack=STACK), deleting=False)


def test_preflight_on_an_empty_namespace_lists_once_per_kind_then_dry_runs_strictly() -> None:
    transport = FakeTransport()
    check_before_apply(Cluster(transport), config())
    name = "infercrane-8b51d0fee928a78116afaac0"
    assert transport.requests == [
        *LISTS,
        (
            "PATCH",
            f"/apis/apps/v1/namespaces/{NS}/deployments/{name}",
            {"fieldManager": "infercrane-provider-v1", "dryRun": "All", "force": "false"},
        ),
        (
            "PATCH",
            f"/api/v1/namespaces/{NS}/services/{name}",
            {"fieldManager": "infercrane-provider-v1", "dryRun": "All", "force": "false"},
        ),
    ]


@pytest.mark.parametrize(
    "breakage",
    [
        lambda m: m["labels"].pop("app.kubernetes.io/managed-by"),
        lambda m: m["labels"].__setitem__("app.kubernetes.io/managed-by", "helm"),
        lambda m: m["labels"].__setitem__("infercrane.dev/external-key-hash", "0" * 24),
        lambda m: m["annotations"].pop("infercrane.dev/external-key"),
        lambda m: m["annotations"].__setitem__("infercrane.dev/external-key", "dep-7-r1"),
    ],
    ids=["no managed-by", "wrong managed-by", "wrong key hash", "no key", "other key"],
)
def test_a_same_named_object_that_is_not_exactly_ours_is_refused_before_any_dry_run(
    breakage: Any,
) -> None:
    desired = workloads.stack_objects(config())[0]
    foreign = live_copy(desired, [("helm", "Update")])
    breakage(foreign["metadata"])
    transport = FakeTransport(live=[foreign])
    with pytest.raises(OwnershipError) as refused:
        check_before_apply(Cluster(transport), config())
    assert refused.value.problems == (
        f"Deployment/{NS}/{desired['metadata']['name']}: exists but is not exactly ours "
        "(managed-by, key-hash label and key annotation must all match); InferCrane never "
        "adopts, changes or deletes it",
    )
    assert transport.requests == LISTS


@pytest.mark.parametrize(
    "manager",
    [("kubectl", "Apply"), ("kubectl", "Update"), ("before-first-apply", "Update")],
)
def test_managers_pulumi_would_silently_rename_are_refused(manager: tuple[str, str]) -> None:
    desired = workloads.stack_objects(config())[0]
    live = live_copy(desired, [("infercrane-provider-v1", "Apply"), manager])
    live["metadata"]["managedFields"][1]["fieldsV1"] = {
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:spec": {"f:containers": {'k:{"name":"runtime"}': {".": {}, "f:image": {}}}}
            },
        }
    }
    assert verdict.ownership_problems(desired, live) == [
        f"Deployment/{NS}/{desired['metadata']['name']}: fields .spec.replicas, "
        '.spec.template.spec.containers[{"name":"runtime"}].image managed by '
        f"{manager[0]!r} ({manager[1]}) would be silently taken over by pulumi-kubernetes; "
        "have that manager release them first"
    ]


def test_our_own_object_with_only_our_manager_is_taken_back() -> None:
    desired = workloads.stack_objects(config())[0]
    live = live_copy(
        desired, [("infercrane-provider-v1", "Apply"), ("kube-controller-manager", "Update")]
    )
    assert verdict.ownership_problems(desired, live) == []


def test_an_object_without_managed_fields_would_be_forced_so_it_is_refused() -> None:
    desired = workloads.stack_objects(config())[0]
    live = live_copy(desired, [])
    assert verdict.ownership_problems(desired, live)[0].endswith(
        "has no managedFields, so the provider would force its apply; refusing"
    )


def test_a_field_conflict_in_the_dry_run_names_field_and_manager() -> None:
    desired = workloads.stack_objects(config())[0]
    conflict = Response(
        409,
        {
            "kind": "Status",
            "reason": "Conflict",
            "message": 'Apply failed with 1 conflict: conflict with "kubectl-edit": .spec.replicas',
            "details": {
                "causes": [
                    {
                        "reason": "FieldManagerConflict",
                        "message": 'conflict with "kubectl-edit"',
                        "field": ".spec.replicas",
                    }
                ]
            },
        },
    )
    path = DEPLOYMENT.path(NS, desired["metadata"]["name"])
    transport = FakeTransport({("PATCH", path): conflict})
    with pytest.raises(OwnershipError) as refused:
        check_before_apply(Cluster(transport), config())
    assert refused.value.problems == (
        f"Deployment/{NS}/{desired['metadata']['name']}: field .spec.replicas is owned by another "
        'manager (conflict with "kubectl-edit"); InferCrane never forces, the value stays theirs',
    )


def test_an_invalid_object_is_rejected_with_the_api_message_only() -> None:
    desired = workloads.stack_objects(config())[0]
    path = DEPLOYMENT.path(NS, desired["metadata"]["name"])
    invalid = Response(422, {"kind": "Status", "message": "spec.template: Invalid value"})
    with pytest.raises(
        RejectedError, match=re.escape("dry-run apply: spec.template: Invalid value")
    ):
        check_before_apply(Cluster(FakeTransport({("PATCH", path): invalid})), config())


def test_kserve_mode_without_the_crd_fails_before_any_object_request() -> None:
    transport = FakeTransport()
    with pytest.raises(
        RejectedError,
        match=re.escape("InferenceService API serving.kserve.io/v1beta1 is not served"),
    ):
        check_before_apply(Cluster(transport), config(workloadApi="kserve"))
    assert transport.requests == [("GET", "/apis/serving.kserve.io/v1beta1", {})]


def conflict_with(manager: str, field: str) -> Response:
    cause = {"reason": "FieldManagerConflict", "message": f'conflict with "{manager}"'}
    return Response(409, {"kind": "Status", "details": {"causes": [cause | {"field": field}]}})


def test_every_failed_dry_run_is_named_in_one_refusal_classified_by_the_worst() -> None:
    two = parse_stack_config(
        samples.kubernetes(), [samples.replica(externalKey=k) for k in ("a", "b")]
    )
    objects = workloads.stack_objects(two)
    deployment_a, service_a, deployment_b, service_b = objects
    answers = [
        conflict_with("kubectl-edit", ".spec.replicas"),
        Response(503, {}),
        conflict_with("helm", ".spec.template"),
        Response(422, {"kind": "Status", "message": "spec.ports: Invalid value"}),
    ]
    refusal = preflight.dry_run_refusal(objects, answers)
    assert isinstance(refusal, OwnershipError)
    subject = f"{NS}/{{}}".format
    a, b = subject(deployment_a["metadata"]["name"]), subject(deployment_b["metadata"]["name"])
    assert refusal.problems == (
        f"Deployment/{a}: field .spec.replicas is owned by another manager (conflict with "
        '"kubectl-edit"); InferCrane never forces, the value stays theirs',
        f"Deployment/{b}: field .spec.template is owned by another manager (conflict with "
        '"helm"); InferCrane never forces, the value stays theirs',
        f"Service/{b}: dry-run apply: spec.ports: Invalid value",
        f"Service/{a}: dry-run apply: API server answered 503, try again",
    )
    rejected = preflight.dry_run_refusal([service_a, service_b], [answers[1], answers[3]])
    assert type(rejected) is RejectedError and len(rejected.problems) == 2
    unavailable = preflight.dry_run_refusal([service_a], [answers[1]])
    assert type(unavailable) is ClusterUnavailableError and unavailable.retryable
    assert preflight.dry_run_refusal([service_a], [Response(200, {})]) is None


@pytest.fixture
def connected(monkeypatch: pytest.MonkeyPatch) -> FakeTransport:
    """What the program's own preflight would ask the cluster, recorded."""
    transport = FakeTransport()
    monkeypatch.setattr(client, "connect", lambda settings: Cluster(transport))
    return transport


def test_the_program_takes_what_its_driver_judged_only_for_the_configuration_it_checked(
    connected: FakeTransport,
) -> None:
    transport = connected
    stack = config(kubeconfig=samples.KUBECONFIG_CONTENTS)
    server = kubeconfigs.identity(stack.kubernetes)
    rendered = workloads.render(stack, stack=STACK)
    checked = handoff.Checked(handoff.digest(stack), server)
    judge = served(checked, rendered, (), ownership_preflight)
    assert judge(stack) is rendered
    assert transport.requests == []
    other = config(kubeconfig=samples.KUBECONFIG_CONTENTS, runtimeClassName="nvidia")
    assert judge(other).config == other  # judged here, as a person's run
    assert judged(ownership_preflight)(stack).config == stack  # a hand-run `pulumi up`
    once = ["GET"] * 3 + ["PATCH"] * 2
    assert [method for method, _, _ in transport.requests] == once * 2


def test_the_program_refuses_a_provider_bound_for_another_server_than_the_driver_checked(
    connected: FakeTransport,
) -> None:
    stack = config(kubeconfig=samples.KUBECONFIG_CONTENTS)
    elsewhere = ClusterIdentity.of("https://127.0.0.1:1", b"another CA")
    checked = handoff.Checked(handoff.digest(stack), elsewhere)
    with pytest.raises(ConfigError) as refused:
        served(checked, workloads.render(stack, stack=STACK), (), ownership_preflight)(stack)
    reached = ClusterIdentity.of("https://127.0.0.1:6443", None)
    assert refused.value.problems == (
        f"infercrane:kubernetes.kubeconfig: the provider would reach {reached}, but this "
        f"run's checks read {elsewhere}; nothing was written",
    )
    assert connected.requests == []


def published(crd: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI v3 document an API server publishes for ``crd``'s group version."""
    version = crd["spec"]["versions"][0]
    gvk = {"group": crd["spec"]["group"], "version": version["name"], "kind": "InferenceService"}
    schema = version["schema"]["openAPIV3Schema"] | {"x-kubernetes-group-version-kind": [gvk]}
    return {"components": {"schemas": {"io.kserve.serving.v1beta1.InferenceService": schema}}}


def kserve_transport(crd: dict[str, Any]) -> FakeTransport:
    discovery = {"resources": [{"name": INFERENCE_SERVICE.plural}]}
    return FakeTransport(
        {
            ("GET", "/apis/serving.kserve.io/v1beta1"): Response(200, discovery),
            ("GET", "/openapi/v3/apis/serving.kserve.io/v1beta1"): Response(200, published(crd)),
        }
    )


def test_a_kserve_that_predates_the_standard_mode_is_refused_in_one_line_before_any_write() -> None:
    crd = yaml.safe_load(KSERVE_CRD.read_text())
    del crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "predictor"
    ]["properties"]["storageUris"]
    transport = kserve_transport(crd)
    with pytest.raises(RejectedError) as refused:
        check_before_apply(Cluster(transport, context="edge"), config(workloadApi="kserve"))
    [problem] = refused.value.problems
    [required] = workloads.WORKLOAD_APIS["kserve"].requires
    assert problem == (
        "InferenceService API serving.kserve.io/v1beta1 has no spec.predictor.storageUris in "
        f"its schema: {required.why} (context edge)"
    )
    assert "\n" not in problem and not refused.value.retryable
    assert [(m, p) for m, p, _ in transport.requests] == [
        ("GET", "/apis/serving.kserve.io/v1beta1"),
        ("GET", "/openapi/v3/apis/serving.kserve.io/v1beta1"),
    ]


def test_a_kserve_whose_schema_knows_the_standard_mode_goes_on_to_the_dry_run() -> None:
    transport = kserve_transport(yaml.safe_load(KSERVE_CRD.read_text()))
    check_before_apply(Cluster(transport), config(workloadApi="kserve"))
    assert [m for m, _, q in transport.requests if q.get("dryRun") == "All"] == ["PATCH"]


def test_a_server_that_publishes_no_schema_for_the_kind_leaves_nothing_to_check() -> None:
    assert (
        preflight.schema_problems(INFERENCE_SERVICE, {}, workloads.WORKLOAD_APIS["kserve"].requires)
        == []
    )


def test_kserve_mode_refuses_a_namespace_whose_predictor_host_kserve_would_never_reconcile() -> (
    None
):
    namespace = "eighteen-chars-ns1"
    transport = kserve_transport(yaml.safe_load(KSERVE_CRD.read_text()))
    kserve = config(workloadApi="kserve", namespace=namespace)
    [isvc] = workloads.stack_objects(kserve)
    name = isvc["metadata"]["name"]
    host = f"{name}-predictor-{namespace}"
    with pytest.raises(RejectedError) as refused:
        check_before_apply(Cluster(transport), kserve)
    assert refused.value.problems == (
        f"InferenceService/{namespace}/{name}: KServe names its predictor's host {host} "
        f"({len(host)} characters, over the 63 of a DNS label) and never reconciles it; in "
        f"KServe mode a namespace has at most {len(namespace) - 1} characters",
    )
    assert not refused.value.retryable
    assert [q.get("dryRun") for m, _, q in transport.requests if m != "GET"] == []
    # One character shorter, the same run goes on to its strict dry-run.
    shorter = kserve_transport(yaml.safe_load(KSERVE_CRD.read_text()))
    check_before_apply(Cluster(shorter), config(workloadApi="kserve", namespace=namespace[:-1]))
    assert [m for m, _, q in shorter.requests if q.get("dryRun") == "All"] == ["PATCH"]
