"""``doctor``: every verb on every owned resource, read-only."""

from __future__ import annotations

import copy
from typing import Any

from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.cluster.doctor import (
    OWNED_VERBS,
    DoctorRow,
    doctor,
    pods_row,
)
from infercrane_pulumi.objects import kserve, naming, workloads
from infercrane_pulumi.objects.kinds import DEPLOYMENT, SERVICE
from tests.unit.fake_cluster import NS, FakeTransport, config


def _doctor_transport(
    denied: set[str], deployments: list[dict[str, Any]] | None = None
) -> FakeTransport:
    class Reviews(FakeTransport):
        def request(self, method: str, path: str, **kwargs: Any) -> Response:
            if path.endswith("selfsubjectaccessreviews"):
                attrs = kwargs["body"]["spec"]["resourceAttributes"]
                allowed = f"{attrs['verb']}:{attrs['resource']}" not in denied
                self.requests.append((method, path, {}))
                return Response(201, {"status": {"allowed": allowed}})
            return super().request(method, path, **kwargs)

    return Reviews(
        {
            ("GET", "/version"): Response(200, {"gitVersion": "v1.36.3"}),
            ("GET", DEPLOYMENT.collection(NS)): Response(200, {"items": deployments or []}),
            ("GET", SERVICE.collection(NS)): Response(200, {"items": []}),
        }
    )


def test_doctor_checks_every_verb_on_every_owned_resource() -> None:
    rows = doctor(Cluster(_doctor_transport(set())), config().kubernetes)
    assert [(r.status, r.name) for r in rows] == [
        ("ok", "config"),
        ("ok", "api"),
        *[("ok", f"rbac:{v}:deployments.apps") for v in OWNED_VERBS],
        ("ok", "list:deployments.apps"),
        *[("ok", f"rbac:{v}:services") for v in OWNED_VERBS],
        ("ok", "list:services"),
        ("ok", "observe:pods"),
    ]


def test_without_the_optional_pod_reader_doctor_informs_and_still_passes() -> None:
    rows = doctor(Cluster(_doctor_transport({"list:pods"})), config().kubernetes)
    assert [r for r in rows if r.status != "ok"] == [
        DoctorRow(
            "info",
            "observe:pods",
            "not granted (optional: deploy/kubernetes/observe/); reasons come from the "
            "workload's own conditions",
        )
    ]


def test_in_kserve_mode_doctor_warns_that_without_pods_ready_can_be_the_previous_intent() -> None:
    apis = [workloads.WORKLOAD_APIS[name] for name in ("deployment", "kserve")]
    assert [pods_row(False, needed=api.pods_needed).status for api in apis] == ["info", "warn"]
    assert pods_row(False, needed=kserve.API.pods_needed).message == (
        "not granted (deploy/kubernetes/observe/): ready is KServe's own Ready, which "
        "until KServe reconciles a change can be the previous intent's"
    )
    assert pods_row(True, needed=kserve.API.pods_needed) == pods_row(True, needed="")


def test_doctor_counts_exactly_ours_never_a_look_alike_with_our_labels() -> None:
    ours = workloads.stack_objects(config())[0]
    look_alike = copy.deepcopy(ours)
    look_alike["metadata"]["annotations"][naming.ANNOTATION_EXTERNAL_KEY] = "someone-else"
    transport = _doctor_transport(set(), [ours, look_alike])
    rows = doctor(Cluster(transport), config().kubernetes)
    assert DoctorRow("ok", "list:deployments.apps", "1 owned object(s)") in rows


def test_doctor_names_a_missing_verb() -> None:
    rows = doctor(Cluster(_doctor_transport({"patch:services"})), config().kubernetes)
    failed = [(r.name, r.message) for r in rows if r.status == "fail"]
    assert failed == [("rbac:patch:services", f"denied in {NS}")]


def test_doctor_creates_nothing() -> None:
    transport = _doctor_transport(set())
    doctor(Cluster(transport), config().kubernetes)
    writes = [
        (m, p)
        for m, p, _ in transport.requests
        if m != "GET" and not p.endswith("selfsubjectaccessreviews")
    ]
    assert writes == []


def test_doctor_warns_when_no_kserve_controller_reconciled_our_inference_services() -> None:
    reconciled: dict[str, Any] = {"status": {"observedGeneration": 1, "conditions": []}}
    cases: list[list[dict[str, Any]]] = [[], [{}, {}], [{}, reconciled]]
    assert [DoctorRow(*kserve.controller_check(owned)) for owned in cases] == [
        DoctorRow(
            "info",
            "kserve:controller",
            "no InferenceService here yet: no sign of a KServe controller either way",
        ),
        DoctorRow(
            "warn",
            "kserve:controller",
            "none of the 2 InferenceService(s) here was reconciled: "
            "no KServe controller seems to run",
        ),
        DoctorRow("ok", "kserve:controller", "1 of 2 reconciled by KServe"),
    ]
