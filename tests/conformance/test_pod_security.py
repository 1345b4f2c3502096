"""Pod Security, decided by the API server's own PodSecurity admission (not a lint).

The test's namespace, bootstrapped from deploy/kubernetes, is switched by the admin to
*enforce* ``restricted``. The provider applies an intent with the default settings and one
with the non-root settings; the ReplicaSet controller then asks the API server for each
Deployment's Pod. The default Pod is refused for exactly the one rule InferCrane leaves to a
setting (``runAsNonRoot``), and observation names that refusal; the hardened Pod is admitted.
The shipped namespace itself enforces ``baseline``, which the default Pod meets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_pulumi.objects import kinds
from tests.conformance.harness import Harness, intent, wait_for
from tests.conformance.test_scheduling_scenarios import pods_of, until_state

pytestmark = pytest.mark.conformance
ENFORCE = "pod-security.kubernetes.io/enforce"
# What the qualification table (docs/explanation/qualification.md) promises: these settings reach
# "restricted".
RESTRICTED_SETTINGS: dict[str, Any] = {"runAsUser": 10001, "readOnlyRootFilesystem": True}


def replica_failure(harness: Harness, key: str) -> str | None:
    live = harness.get(kinds.DEPLOYMENT, key) or {}
    for condition in (live.get("status") or {}).get("conditions") or []:
        if condition["type"] == "ReplicaFailure" and condition["status"] == "True":
            message: str = condition["message"]
            return message
    return None


def test_the_shipped_namespace_enforces_baseline(
    harness: Harness, admin_client: client.ApiClient
) -> None:
    namespace: Any = client.CoreV1Api(admin_client).read_namespace(harness.namespace)
    labels = namespace.metadata.labels
    assert (labels[ENFORCE], labels["pod-security.kubernetes.io/warn"]) == (
        "baseline",
        "restricted",
    )


def test_in_a_restricted_namespace_only_the_non_root_settings_are_admitted(
    observing_harness: Harness, admin_client: client.ApiClient, tmp_path: Path
) -> None:
    harness = observing_harness
    client.CoreV1Api(admin_client).patch_namespace(
        harness.namespace, {"metadata": {"labels": {ENFORCE: "restricted"}}}
    )
    default = harness.namespace_stack(tmp_path / "default", stack_name=f"{harness.stack_name}-d")
    hardened = harness.namespace_stack(
        tmp_path / "hardened", stack_name=f"{harness.stack_name}-h", **RESTRICTED_SETTINGS
    )
    default.ensure([intent("psa-default")])
    hardened.ensure([intent("psa-hardened")])

    refusal = wait_for(
        lambda: replica_failure(harness, "psa-default"),
        timeout=60,
        what="the ReplicaSet's refused Pod",
    )
    assert 'violates PodSecurity "restricted:latest"' in refusal
    # The only rule the defaults leave open: seccomp, capabilities and privilege escalation
    # are already restricted-level.
    assert "runAsNonRoot != true" in refusal
    for met in ("seccompProfile", "unrestricted capabilities", "allowPrivilegeEscalation"):
        assert met not in refusal, refusal
    assert pods_of(admin_client, harness.namespace, "psa-default") == []
    observed = until_state(default, "psa-default", "provisioning", contains="violates PodSecurity")
    assert observed.reason.startswith("FailedCreate: ")

    # Admitted: the Pod exists (it waits for a GPU node no cluster has, which is fine here).
    [pod] = wait_for(
        lambda: pods_of(admin_client, harness.namespace, "psa-hardened"),
        timeout=60,
        what="the hardened Pod",
    )
    assert pod.spec.security_context.run_as_non_root is True
    assert replica_failure(harness, "psa-hardened") is None
    default.destroy()
    hardened.destroy()
