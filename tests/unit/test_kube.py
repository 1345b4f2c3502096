"""Preflight, doctor and inventory decisions, driven through a recorded fake transport."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

import pytest
import urllib3

from infercrane_pulumi import kube, manifests
from infercrane_pulumi.errors import ClusterUnavailableError, OwnershipError, RejectedError
from infercrane_pulumi.intents import StackConfig, parse_stack_config
from tests.unit import samples

NS = "infercrane-system"


class FakeTransport:
    """Answers by (method, path); records every request in order."""

    def __init__(self, answers: dict[tuple[str, str], kube.Response] | None = None) -> None:
        self.answers = answers or {}
        self.requests: list[tuple[str, str, dict[str, str]]] = []

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = "application/json",
    ) -> kube.Response:
        self.requests.append((method, path, dict(query)))
        if (method, path) in self.answers:
            return self.answers[(method, path)]
        if method == "PATCH":
            return kube.Response(200, body)
        return kube.Response(404, {"kind": "Status", "reason": "NotFound"})


def config(**settings: Any) -> StackConfig:
    return parse_stack_config(samples.kubernetes(**settings), [samples.replica()])


def live_copy(obj: dict[str, Any], managers: list[tuple[str, str]]) -> dict[str, Any]:
    live = copy.deepcopy(obj)
    live["metadata"]["managedFields"] = [
        {"manager": m, "operation": op, "fieldsType": "FieldsV1"} for m, op in managers
    ]
    return live


def test_preflight_on_an_empty_namespace_gets_then_dry_runs_strictly() -> None:
    transport = FakeTransport()
    kube.check_before_apply(kube.Cluster(transport), config())
    name = "infercrane-8b51d0fee928a78116afaac0"
    assert transport.requests == [
        ("GET", f"/apis/apps/v1/namespaces/{NS}/deployments/{name}", {}),
        ("GET", f"/api/v1/namespaces/{NS}/services/{name}", {}),
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
    desired = manifests.stack_objects(config())[0]
    foreign = live_copy(desired, [("helm", "Update")])
    breakage(foreign["metadata"])
    path = kube.DEPLOYMENT.path(NS, desired["metadata"]["name"])
    transport = FakeTransport({("GET", path): kube.Response(200, foreign)})
    with pytest.raises(OwnershipError) as refused:
        kube.check_before_apply(kube.Cluster(transport), config())
    assert refused.value.problems == (
        f"Deployment/{NS}/{desired['metadata']['name']}: exists but is not exactly ours "
        "(managed-by, key-hash label and key annotation must all match); InferCrane never "
        "adopts, changes or deletes it",
    )
    assert [method for method, _, _ in transport.requests] == ["GET", "GET"]


@pytest.mark.parametrize(
    "manager",
    [("kubectl", "Apply"), ("kubectl", "Update"), ("before-first-apply", "Update")],
)
def test_managers_pulumi_would_silently_rename_are_refused(manager: tuple[str, str]) -> None:
    desired = manifests.stack_objects(config())[0]
    live = live_copy(desired, [("infercrane-provider-v1", "Apply"), manager])
    live["metadata"]["managedFields"][1]["fieldsV1"] = {
        "f:spec": {
            "f:replicas": {},
            "f:template": {
                "f:spec": {"f:containers": {'k:{"name":"runtime"}': {".": {}, "f:image": {}}}}
            },
        }
    }
    assert kube.ownership_problems(desired, live) == [
        f"Deployment/{NS}/{desired['metadata']['name']}: fields .spec.replicas, "
        '.spec.template.spec.containers[{"name":"runtime"}].image managed by '
        f"{manager[0]!r} ({manager[1]}) would be silently taken over by pulumi-kubernetes; "
        "have that manager release them first"
    ]


def test_our_own_object_with_only_our_manager_is_taken_back() -> None:
    desired = manifests.stack_objects(config())[0]
    live = live_copy(
        desired, [("infercrane-provider-v1", "Apply"), ("kube-controller-manager", "Update")]
    )
    assert kube.ownership_problems(desired, live) == []


def test_an_object_without_managed_fields_would_be_forced_so_it_is_refused() -> None:
    desired = manifests.stack_objects(config())[0]
    live = live_copy(desired, [])
    assert kube.ownership_problems(desired, live)[0].endswith(
        "has no managedFields, so the provider would force its apply; refusing"
    )


def test_a_field_conflict_in_the_dry_run_names_field_and_manager() -> None:
    desired = manifests.stack_objects(config())[0]
    conflict = kube.Response(
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
    path = kube.DEPLOYMENT.path(NS, desired["metadata"]["name"])
    transport = FakeTransport({("PATCH", path): conflict})
    with pytest.raises(OwnershipError) as refused:
        kube.check_before_apply(kube.Cluster(transport), config())
    assert refused.value.problems == (
        f"Deployment/{NS}/{desired['metadata']['name']}: field .spec.replicas is owned by another "
        'manager (conflict with "kubectl-edit"); InferCrane never forces, the value stays theirs',
    )


def test_an_invalid_object_is_rejected_with_the_api_message_only() -> None:
    desired = manifests.stack_objects(config())[0]
    path = kube.DEPLOYMENT.path(NS, desired["metadata"]["name"])
    invalid = kube.Response(422, {"kind": "Status", "message": "spec.template: Invalid value"})
    with pytest.raises(
        RejectedError, match=re.escape("dry-run apply: spec.template: Invalid value")
    ):
        kube.check_before_apply(kube.Cluster(FakeTransport({("PATCH", path): invalid})), config())


def test_server_errors_are_retryable_and_forbidden_is_not() -> None:
    unavailable = kube.Response(503, {"message": "etcdserver: leader changed"})
    with pytest.raises(ClusterUnavailableError) as error:
        kube.raise_for_status(unavailable, "Deployment/ns/x")
    assert error.value.retryable
    forbidden = kube.Response(403, {"message": 'deployments.apps "x" is forbidden'})
    with pytest.raises(RejectedError) as denied:
        kube.raise_for_status(forbidden, "Deployment/ns/x")
    assert not denied.value.retryable


def test_kserve_mode_without_the_crd_fails_before_any_object_request() -> None:
    transport = FakeTransport()
    with pytest.raises(
        RejectedError,
        match=re.escape("InferenceService API serving.kserve.io/v1beta1 is not served"),
    ):
        kube.check_before_apply(kube.Cluster(transport), config(workloadApi="kserve"))
    assert transport.requests == [("GET", "/apis/serving.kserve.io/v1beta1", {})]


def _doctor_transport(denied: set[str]) -> FakeTransport:
    class Reviews(FakeTransport):
        def request(self, method: str, path: str, **kwargs: Any) -> kube.Response:
            if path.endswith("selfsubjectaccessreviews"):
                attrs = kwargs["body"]["spec"]["resourceAttributes"]
                allowed = f"{attrs['verb']}:{attrs['resource']}" not in denied
                self.requests.append((method, path, {}))
                return kube.Response(201, {"status": {"allowed": allowed}})
            return super().request(method, path, **kwargs)

    return Reviews(
        {
            ("GET", "/version"): kube.Response(200, {"gitVersion": "v1.36.3"}),
            ("GET", kube.DEPLOYMENT.collection(NS)): kube.Response(200, {"items": []}),
            ("GET", kube.SERVICE.collection(NS)): kube.Response(200, {"items": []}),
        }
    )


def test_doctor_checks_every_verb_on_every_owned_resource() -> None:
    rows = kube.doctor(kube.Cluster(_doctor_transport(set())), config().kubernetes)
    assert [(r.status, r.name) for r in rows] == [
        ("ok", "config"),
        ("ok", "api"),
        *[("ok", f"rbac:{v}:deployments.apps") for v in kube.OWNED_VERBS],
        ("ok", "list:deployments.apps"),
        *[("ok", f"rbac:{v}:services") for v in kube.OWNED_VERBS],
        ("ok", "list:services"),
    ]


def test_doctor_names_a_missing_verb() -> None:
    rows = kube.doctor(kube.Cluster(_doctor_transport({"patch:services"})), config().kubernetes)
    failed = [(r.name, r.message) for r in rows if r.status == "fail"]
    assert failed == [("rbac:patch:services", f"denied in {NS}")]


def test_doctor_creates_nothing() -> None:
    transport = _doctor_transport(set())
    kube.doctor(kube.Cluster(transport), config().kubernetes)
    writes = [
        (m, p)
        for m, p, _ in transport.requests
        if m != "GET" and not p.endswith("selfsubjectaccessreviews")
    ]
    assert writes == []


def _with_status(obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(obj) | {"status": status}


@pytest.mark.parametrize(
    ("deployment_status", "with_service", "state"),
    [
        ({"readyReplicas": 1}, True, "ready"),
        ({"replicas": 1, "unavailableReplicas": 1}, True, "provisioning"),
        (
            {
                "conditions": [
                    {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}
                ]
            },
            True,
            "failed",
        ),
        ({"readyReplicas": 1}, False, "degraded"),
    ],
)
def test_replica_state_from_live_objects(
    deployment_status: dict[str, Any], with_service: bool, state: str
) -> None:
    deployment, service = manifests.stack_objects(config())
    live = [_with_status(deployment, deployment_status)] + ([service] if with_service else [])
    assert kube.replica_state(config().kubernetes, live) == state


def test_inventory_lists_exactly_the_stack_keys_and_marks_strays() -> None:
    ours = manifests.stack_objects(config())
    stray = manifests.stack_objects(
        parse_stack_config(samples.kubernetes(), [samples.replica(externalKey="gone")])
    )
    foreign = copy.deepcopy(ours[0])
    foreign["metadata"]["labels"]["infercrane.dev/external-key-hash"] = "f" * 24
    items = {
        kube.DEPLOYMENT: [ours[0], stray[0], foreign],
        kube.SERVICE: [ours[1], stray[1]],
    }
    transport = FakeTransport(
        {
            ("GET", kind.collection(NS)): kube.Response(200, {"items": copy.deepcopy(found)})
            for kind, found in items.items()
        }
    )
    entries = kube.inventory(kube.Cluster(transport), config())
    assert [(e.external_key, e.state, len(e.objects)) for e in entries] == [
        ("dep-7-r0", "provisioning", 2),
        ("gone", "orphaned", 2),
    ]
    assert {q["labelSelector"] for _, _, q in transport.requests} == {
        "app.kubernetes.io/managed-by=infercrane,app.kubernetes.io/name=infercrane-runtime"
    }


class _ExplodingApiClient:
    """Stands in for the official client when the transport underneath fails."""

    def param_serialize(self, method: str, path: str, **_: Any) -> tuple[Any, ...]:
        return method, f"https://10.0.0.1:6443{path}?token=s3cr3t", {}, None, []

    def call_api(self, *_: Any, **__: Any) -> Any:
        raise urllib3.exceptions.MaxRetryError(None, "https://10.0.0.1:6443/?token=s3cr3t")


def test_transport_failures_become_retryable_errors_that_echo_nothing() -> None:
    transport = kube.RestTransport(_ExplodingApiClient())
    with pytest.raises(ClusterUnavailableError) as error:
        transport.request("GET", "/version")
    assert error.value.retryable
    assert "s3cr3t" not in str(error.value)
    assert "10.0.0.1" not in str(error.value)
    assert str(error.value) == (
        "cannot reach the API server (MaxRetryError); check the context and that the cluster is up"
    )
