"""deploy/kubernetes stays least-privilege: a lint over every shipped manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from infercrane_pulumi.config.intents import PolicySettings
from infercrane_pulumi.config.rules import parse_policy, parse_stack_config
from infercrane_pulumi.objects import workloads
from tests.unit import samples

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
ALLOWED_KINDS = {
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "HTTPRoute",
    "NetworkPolicy",
    "Deployment",
    "PodDisruptionBudget",
    "ConfigMap",
}
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
    """Every shipped object (Kustomize's own files are no objects: test_kustomize.py)."""
    found = [
        (str(path.relative_to(DEPLOY)), doc)
        for path in sorted(DEPLOY.rglob("*.yaml"))
        if path.name != "kustomization.yaml"
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
        # The stack's namespace, by name, read only: its uid says which cluster a stack is in.
        "infercrane-namespace-identity": [
            {
                "apiGroups": [""],
                "resources": ["namespaces"],
                "resourceNames": ["infercrane-system"],
                "verbs": ["get"],
            },
        ],
        # The runner's stack file, that one ConfigMap by name, read only; its status, that
        # other one by name, read and applied.
        "infercrane-runner-stack": [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["infercrane-stack"],
                "verbs": ["get"],
            },
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["infercrane-stack-status"],
                "verbs": ["get", "patch"],
            },
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
        "infercrane-runner-stack",
        "infercrane-namespace-identity",
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


def test_the_namespace_enforces_baseline_and_warns_and_audits_restricted() -> None:
    [namespace] = [doc for _, doc in documents() if doc["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "infercrane",
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted",
    }


def test_the_network_policy_lets_only_the_gateway_reach_the_serving_port() -> None:
    [policy] = [doc for path, doc in documents() if path == "network-policy/runtime-ingress.yaml"]
    # It selects exactly the Pods InferCrane renders (their labels), on the port they all name.
    config = parse_stack_config(samples.kubernetes(), [samples.replica()])
    [deployment, _] = workloads.stack_objects(config)
    template = deployment["spec"]["template"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()
    assert selector == {
        "app.kubernetes.io/name": "infercrane-runtime",
        "app.kubernetes.io/managed-by": "infercrane",
    }
    [port] = template["spec"]["containers"][0]["ports"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {
            "from": [
                {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "infercrane-gateway"}}}
            ],
            "ports": [{"protocol": "TCP", "port": port["name"]}],
        }
    ]


RUNNER = "runner/runner.yaml"


def _runner() -> dict[str, dict[str, Any]]:
    """The runner's objects by kind (its ConfigMaps by name)."""
    return {
        doc["metadata"]["name"] if doc["kind"] == "ConfigMap" else doc["kind"]: doc
        for path, doc in documents()
        if path == RUNNER
    }


def test_the_runner_runs_as_the_shipped_account_hardened_and_digest_pinned() -> None:
    deployment = _runner()["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "infercrane-control-plane"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
        "fsGroup": 65532,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for container in [*pod["initContainers"], *pod["containers"]]:
        assert container["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        assert container["image"].startswith("infercrane.local/infercrane/runner@sha256:")
        assert "limits" in container["resources"]
    # Only emptyDirs are writable; the stack and the state's passphrase are mounted read-only,
    # and no host path or projected credential other than the ServiceAccount's is mounted.
    assert {v["name"]: sorted(set(v) - {"name"}) for v in pod["volumes"]} == {
        "stack": ["configMap"],
        "state": ["secret"],
        "state-ca": ["secret"],
        "policy": ["configMap"],
        "pulumi-home": ["emptyDir"],
        "tmp": ["emptyDir"],
    }
    [runner] = pod["containers"]
    assert runner["args"][:2] == ["up", "--stack"] and "--every" in runner["args"]
    # Each run applies the stack file as the API server holds it, the one the Role may read.
    configmap = runner["args"][runner["args"].index("--configmap") + 1]
    assert configmap == pod_volume(pod, "stack")["configMap"]["name"] == "infercrane-stack"
    assert "--timeout" in runner["args"]  # a hung run never stalls the loop
    # The platform's policy, from a ConfigMap of its own, which the stack file cannot change.
    policy = runner["args"][runner["args"].index("--policy") + 1]
    [mount] = [m for m in runner["volumeMounts"] if policy.startswith(m["mountPath"] + "/")]
    shipped = _runner()["infercrane-runner-policy"]
    assert pod_volume(pod, mount["name"])["configMap"]["name"] == shipped["metadata"]["name"]
    assert parse_policy(
        yaml.safe_load(shipped["data"][policy.rsplit("/", 1)[1]]), source="shipped"
    ) == PolicySettings(allowed_secrets=("infercrane-worker",))
    assert [e["name"] for e in runner["env"]] == ["POD_NAMESPACE", "PULUMI_BACKEND_URL"]


def pod_volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    [volume] = [v for v in pod["volumes"] if v["name"] == name]
    return dict(volume)


def test_the_runner_policy_lets_it_reach_the_api_server_dns_and_the_backend_only() -> None:
    found = _runner()
    selector = found["Deployment"]["spec"]["selector"]["matchLabels"]
    assert found["PodDisruptionBudget"]["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": selector},
    }
    policy = found["NetworkPolicy"]["spec"]
    assert policy["podSelector"] == {"matchLabels": selector}
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy  # nothing reaches the runner
    ports = [[(p["protocol"], p["port"]) for p in rule["ports"]] for rule in policy["egress"]]
    assert ports == [[("TCP", 6443)], [("TCP", 5432)], [("UDP", 53), ("TCP", 53)]]
    for rule in policy["egress"]:
        assert all(peer.get("ipBlock", {}).get("cidr") != "0.0.0.0/0" for peer in rule["to"])
