"""deploy/kubernetes stays least-privilege: a lint over every shipped manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
ALLOWED_KINDS = {"Namespace", "ServiceAccount", "Role", "RoleBinding", "HTTPRoute"}
FORBIDDEN_RESOURCES = {
    "secrets",
    "pods",
    "roles",
    "rolebindings",
    "clusterroles",
    "clusterrolebindings",
}
FORBIDDEN_VERBS = {"escalate", "bind", "impersonate"}


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = [
        (str(path.relative_to(DEPLOY)), doc)
        for path in sorted(DEPLOY.rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]
    assert len(found) >= 8
    return found


@pytest.mark.parametrize(
    ("path", "doc"), documents(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_only_namespaced_bootstrap_kinds(path: str, doc: dict[str, Any]) -> None:
    assert doc["kind"] in ALLOWED_KINDS, path
    if doc["kind"] != "Namespace":
        assert doc["metadata"]["namespace"] == "infercrane-system", path
    if doc["kind"] != "HTTPRoute":
        kubernetes_validate.validate(doc, "1.36.0", strict=True)


def test_no_wildcard_anywhere() -> None:
    for path, doc in documents():
        assert "*" not in yaml.safe_dump(doc), path


def test_roles_grant_only_the_owned_resources_and_no_rbac_power() -> None:
    rules = {
        doc["metadata"]["name"]: doc["rules"] for _, doc in documents() if doc["kind"] == "Role"
    }
    assert rules == {
        "infercrane-provider-deployment": [
            {
                "apiGroups": ["apps"],
                "resources": ["deployments"],
                "verbs": ["get", "list", "create", "patch", "delete"],
            },
            {
                "apiGroups": [""],
                "resources": ["services"],
                "verbs": ["get", "list", "create", "patch", "delete"],
            },
        ],
        "infercrane-provider-kserve": [
            {
                "apiGroups": ["serving.kserve.io"],
                "resources": ["inferenceservices"],
                "verbs": ["get", "list", "create", "patch", "delete"],
            },
        ],
        "infercrane-observe-pods": [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
        ],
    }
    for name, role_rules in rules.items():
        # Only the optional observation Role may read Pods, and it may only read them.
        forbidden = FORBIDDEN_RESOURCES - ({"pods"} if name == "infercrane-observe-pods" else set())
        for rule in role_rules:
            assert not forbidden & set(rule["resources"])
            assert not FORBIDDEN_VERBS & set(rule["verbs"])


def test_service_accounts_mount_tokens_only_for_the_control_plane() -> None:
    accounts = {
        doc["metadata"]["name"]: doc["automountServiceAccountToken"]
        for _, doc in documents()
        if doc["kind"] == "ServiceAccount"
    }
    assert accounts == {"infercrane-control-plane": True, "infercrane-runtime": False}


def test_role_bindings_bind_our_roles_to_the_control_plane_account() -> None:
    bindings = [doc for _, doc in documents() if doc["kind"] == "RoleBinding"]
    assert {b["roleRef"]["name"] for b in bindings} == {
        "infercrane-provider-deployment",
        "infercrane-provider-kserve",
        "infercrane-observe-pods",
    }
    for binding in bindings:
        assert binding["roleRef"]["kind"] == "Role"
        assert binding["subjects"] == [
            {
                "kind": "ServiceAccount",
                "name": "infercrane-control-plane",
                "namespace": "infercrane-system",
            }
        ]


def test_the_gateway_route_sends_everything_to_the_infercrane_gateway_only() -> None:
    [route] = [doc for _, doc in documents() if doc["kind"] == "HTTPRoute"]
    assert route["spec"]["rules"] == [
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
            "backendRefs": [{"name": "infercrane-gateway", "port": 8080}],
        }
    ]
