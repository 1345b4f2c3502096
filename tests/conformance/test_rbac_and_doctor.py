"""The shipped Role is enough and no more: doctor, and 403s for everything else (scenarios 8, 9)."""

from __future__ import annotations

import subprocess

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from infercrane_pulumi.cluster.doctor import OWNED_VERBS
from infercrane_pulumi.objects import workloads
from tests.conformance.backends import Tenant
from tests.conformance.harness import Harness, replica

pytestmark = pytest.mark.conformance


def doctor(harness: Harness) -> subprocess.CompletedProcess[str]:
    """The CLI's doctor with the Pulumi the suite's runs use (its CLI and PULUMI_HOME)."""
    pulumi = {"PULUMI_HOME": str(harness.env.pulumi_home)}
    if harness.env.bin_dir is not None:
        pulumi["INFERCRANE_TOOLS_BIN"] = str(harness.env.bin_dir)
    return harness.cli(
        "doctor", "--config", str(harness.stack_file), env=harness.process_env() | pulumi
    )


def test_doctor_passes_under_the_shipped_role_and_creates_nothing(harness: Harness) -> None:
    harness.configure([replica("doctor-r0")])
    before = harness.resource_versions()
    completed = doctor(harness)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].split() == ["STATUS", "NAME", "MESSAGE"]
    owned = workloads.WORKLOAD_APIS["deployment"].kinds
    expected = ["config", "api"] + [
        name
        for kind in owned
        for name in [
            *(f"rbac:{verb}:{kind.resource}" for verb in OWNED_VERBS),
            f"list:{kind.resource}",
        ]
    ]
    # Every required check passes; the optional Pod reader is not bound here, and says so.
    assert [line.split()[:2] for line in lines[1:]] == [
        *(["OK", name] for name in expected),
        ["INFO", "observe:pods"],
        ["OK", "pulumi:cli"],
        ["OK", "pulumi:plugin"],
    ]
    assert harness.resource_versions() == before == {}


def test_doctor_names_the_verb_removed_from_the_role(
    harness: Harness, admin_client: client.ApiClient
) -> None:
    rbac = client.RbacAuthorizationV1Api(admin_client)
    role = rbac.read_namespaced_role("infercrane-provider-deployment", harness.namespace)
    assert role.rules is not None
    [services] = [rule for rule in role.rules if rule.resources == ["services"]]
    services.verbs = [v for v in services.verbs if v != "patch"]
    rbac.replace_namespaced_role("infercrane-provider-deployment", harness.namespace, role)
    harness.configure([replica("doctor-r0")])
    completed = doctor(harness)
    assert completed.returncode == 1
    failed = [line for line in completed.stdout.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1
    assert failed[0].split()[1] == "rbac:patch:services"


def _status(call: object) -> int:
    try:
        call()  # type: ignore[operator]
    except ApiException as error:
        return int(error.status)
    return 200


def test_the_provider_is_the_namespace_service_account_and_nothing_more(
    tenant: Tenant, provider_client: client.ApiClient
) -> None:
    review = client.AuthenticationV1Api(provider_client).create_self_subject_review(
        client.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview")
    )
    assert review.status is not None and review.status.user_info is not None
    who = review.status.user_info
    assert who.username == f"system:serviceaccount:{tenant.namespace}:infercrane-control-plane"
    assert set(who.groups or []) == {
        "system:serviceaccounts",
        f"system:serviceaccounts:{tenant.namespace}",
        "system:authenticated",
    }
    # The kubeconfig the provider runs with holds this identity and nothing else.
    document = tenant.provider.document()
    assert [len(document[section]) for section in ("clusters", "users", "contexts")] == [1, 1, 1]
    assert document["users"][0]["user"].keys() == {"token"}
    assert tenant.provider.kubeconfig.stat().st_mode & 0o777 == 0o600


def test_the_provider_identity_is_denied_everything_else(
    tenant: Tenant, provider_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(provider_client)
    rbac = client.RbacAuthorizationV1Api(provider_client)
    ns = tenant.namespace
    denied = {
        "read secret": lambda: core.read_namespaced_secret("infercrane-worker", ns),
        "list secrets": lambda: core.list_namespaced_secret(ns),
        "list pods": lambda: core.list_namespaced_pod(ns),
        "create namespace": lambda: core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="provider-made"))
        ),
        "create cluster role": lambda: rbac.create_cluster_role(
            client.V1ClusterRole(metadata=client.V1ObjectMeta(name="provider-made"))
        ),
        "patch role": lambda: rbac.patch_namespaced_role(
            "infercrane-provider-deployment", ns, {"rules": []}
        ),
        "create role binding": lambda: rbac.create_namespaced_role_binding(
            ns,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="escalate"),
                role_ref=client.V1RoleRef(
                    api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"
                ),
                subjects=[client.RbacV1Subject(**tenant.provider.subject)],
            ),
        ),
        "list deployments elsewhere": lambda: client.AppsV1Api(
            provider_client
        ).list_namespaced_deployment("default"),
    }
    assert {what: _status(call) for what, call in denied.items()} == dict.fromkeys(denied, 403)
