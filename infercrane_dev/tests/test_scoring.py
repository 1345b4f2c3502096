"""`make lint`'s scoring decisions: what the tools read, what a finding is, which pass."""

from __future__ import annotations

from typing import Any

import yaml

from infercrane_dev import scoring
from infercrane_dev.scoring import Finding
from infercrane_pulumi.config.files import load_stack_file
from infercrane_pulumi.objects import workloads


def test_every_variant_is_scored_both_workload_apis_and_custom_workloads_included() -> None:
    stacks = scoring.variant_stacks()
    assert sorted(stacks) == ["defaults-kserve", "demo", "every-option", "every-option-kserve"]
    configs = [load_stack_file(path) for path in stacks.values()]
    assert {c.kubernetes.workload_api for c in configs} == {"deployment", "kserve"}
    assert any(i.workload is not None for c in configs for i in c.replicas)


def test_a_kserve_variant_is_scored_as_the_deployment_kserve_makes_with_the_policy() -> None:
    config = load_stack_file(scoring.variant_stacks()["defaults-kserve"])
    [isvc] = workloads.stack_objects(config)
    policy = yaml.safe_load(scoring.NETWORK_POLICY.read_text())
    deployment, namespaced_policy = scoring.scored_objects([isvc], policy)
    predictor = {
        k: v
        for k, v in isvc["spec"]["predictor"].items()
        if k not in ("minReplicas", "maxReplicas")
    }
    name = isvc["metadata"]["name"]
    labels = isvc["metadata"]["labels"] | {"serving.kserve.io/inferenceservice": name}
    assert deployment == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{name}-predictor", "namespace": "team-a", "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"serving.kserve.io/inferenceservice": name}},
            "template": {"metadata": {"labels": labels}, "spec": predictor},
        },
    }
    assert namespaced_policy["metadata"]["namespace"] == "team-a"
    assert policy["metadata"]["namespace"] == "infercrane-system"  # the shipped one, untouched


KUBE_SCORE_REPORT: list[dict[str, Any]] = [
    {
        "object_meta": {"name": "infercrane-x"},
        "type_meta": {"kind": "Deployment"},
        "checks": [
            {
                "check": {"id": "container-resources"},
                "grade": 1,
                "skipped": False,
                "comments": [{"summary": "CPU limit is not set"}],
            },
            {
                "check": {"id": "deployment-replicas"},
                "grade": 5,
                "skipped": False,
                "comments": [{"summary": "Deployment few replicas"}],
            },
            {"check": {"id": "pod-probes"}, "grade": 10, "skipped": False, "comments": []},
            {
                "check": {"id": "container-seccomp-profile"},
                "grade": 1,
                "skipped": True,
                "comments": [],
            },
        ],
    }
]


def test_kube_score_findings_are_every_check_short_of_ok_warnings_included() -> None:
    assert scoring.kube_score_findings("demo", KUBE_SCORE_REPORT) == [
        Finding(
            "kube-score",
            "container-resources",
            "demo",
            "Deployment/infercrane-x",
            "CPU limit is not set",
        ),
        Finding(
            "kube-score",
            "deployment-replicas",
            "demo",
            "Deployment/infercrane-x",
            "Deployment few replicas",
        ),
    ]


def test_checkov_findings_read_one_report_or_a_list_and_an_empty_summary() -> None:
    failed = {"check_id": "CKV_K8S_11", "resource": "Deployment.ns.x", "check_name": "CPU limits"}
    one = {"results": {"failed_checks": [failed]}}
    expected = [Finding("checkov", "CKV_K8S_11", "v", "Deployment.ns.x", "CPU limits")]
    assert scoring.checkov_findings("v", one) == expected
    assert scoring.checkov_findings("v", [one]) == expected
    assert scoring.checkov_findings("v", {"passed": 3, "failed": 0}) == []


def test_only_listed_checks_pass_and_an_exception_nothing_needs_fails_too() -> None:
    findings = [
        Finding("kube-score", "deployment-replicas", "demo", "Deployment/a", "few replicas"),
        Finding("checkov", "CKV_K8S_8", "demo", "Deployment.ns.a", "Liveness probe"),
    ]
    exceptions = {
        "kube-score": {"deployment-replicas": {"reason": "one replica is the contract"}},
        "checkov": {"CKV_K8S_11": {"reason": "no CPU limit"}},
    }
    assert scoring.verdict(findings, exceptions) == [
        "checkov CKV_K8S_8 demo Deployment.ns.a: Liveness probe",
        "exceptions.yaml: checkov CKV_K8S_11 is excepted but found nowhere",
    ]


def test_the_shipped_exceptions_each_give_a_reason() -> None:
    exceptions = scoring.load_exceptions()
    assert set(exceptions) == {"kube-score", "checkov"}
    assert all(
        len(entry["reason"].split()) >= 8
        for checks in exceptions.values()
        for entry in checks.values()
    )
