"""The hardened Pod runs: on the local control plane's real node (kubelet + containerd + runc,
this machine), in a namespace that *enforces* ``restricted``, an intent with the non-root and
read-only settings is applied by the provider through ``NamespaceStack``, admitted, started
and observed loading under its startup probe (the stand-in takes 15 s to "load"), then
``ready``; it serves with the worker credential.

What the kernel says about the running process is read from the host's /proc (the node is
this machine): its user, its seccomp filter, its empty capability sets, no-new-privileges, a
read-only root with writable /tmp and home. Needs a real node (root on Debian 12, the machine's
one real-node lock): otherwise skipped with the reason (failed under INFERCRANE_REQUIRE_TOOLS=1).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.localcluster.processes import processes_running
from infercrane_dev.tests.realnode_fixtures import SERVER_IMAGE, node_spec, require_real_node
from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import naming
from tests.conformance.harness import wait_for
from tests.conformance.realnode import STANDIN_RESOURCES, http_get, state_environment

pytestmark = [pytest.mark.conformance, pytest.mark.real_node, pytest.mark.timeout(600)]
NAMESPACE = "hardened"
USER = 10001


@pytest.fixture(scope="module")
def plane() -> Iterator[LocalControlPlane]:
    require_real_node()
    with LocalControlPlane(scheduling=True, real_node=node_spec()) as started:
        yield started


def proc_facts(pid: int) -> dict[str, str]:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    facts = dict(line.split(":\t", 1) for line in status if ":\t" in line)
    mounts = {}
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        mounts[fields[4]] = fields[5].split(",")[0]  # mount point -> ro | rw
    return {
        "Uid": facts["Uid"].split()[0],
        "Gid": facts["Gid"].split()[0],
        "Seccomp": facts["Seccomp"].strip(),
        "NoNewPrivs": facts["NoNewPrivs"].strip(),
        "CapEff": facts["CapEff"].strip(),
        "CapPrm": facts["CapPrm"].strip(),
        "/": mounts["/"],
        "/tmp": mounts["/tmp"],
        "/home/runtime": mounts["/home/runtime"],
    }


def process_serving(model: str) -> int | None:
    """The host PID of the container's server: its argv names the test's unique model."""
    found = processes_running(
        lambda argv: model.encode() in argv and b"vllm.entrypoints.openai.api_server" in argv
    )
    return found[0] if found else None


def test_a_hardened_pod_is_admitted_as_restricted_runs_becomes_ready_and_serves(
    plane: LocalControlPlane, tmp_path: Path
) -> None:
    with plane.api_client(plane.admin_context) as admin:
        # With the optional Pod reader: observation reads the Pods' reasons.
        bootstrapped = bootstrap_namespace(admin, NAMESPACE, deploy_dir=DEPLOY_DIR, observe=True)
        core = client.CoreV1Api(admin)
        core.patch_namespace(
            NAMESPACE,
            {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
        )
        env = state_environment(plane.kubeconfig_path, tmp_path / "state")
        settings = KubernetesSettings.model_validate(
            {
                "context": plane.provider_context,
                "namespace": NAMESPACE,
                "imageDigest": plane.node_images[SERVER_IMAGE],
                "resources": STANDIN_RESOURCES,
                "shmSize": "64Mi",
                "startupSeconds": 60,
                "runAsUser": USER,
                "readOnlyRootFilesystem": True,
            }
        )
        model = f"hardened/standin-{uuid.uuid4().hex[:8]}"
        intent = ReplicaIntent.model_validate(
            {
                "externalKey": "hardened-r0",
                "model": model,
                "gpu": "NVIDIA-L4",
                "runtimeArgs": ["--standin-load-seconds", "15"],
            }
        )
        stack = NamespaceStack(settings, env, tmp_path / "workspace")
        try:
            [applied] = stack.ensure([intent]).replicas
            assert applied.change == "create"

            def observed(state: str, reason: str = "") -> bool:
                [seen] = stack.observe("hardened-r0")
                return seen.state == state and seen.reason.startswith(reason)

            wait_for(
                lambda: observed("provisioning", "Starting: container runtime is running"),
                timeout=120,
                what="the replica observed loading under its startup probe",
            )
            wait_for(lambda: observed("ready"), timeout=180, what="the replica observed ready")
            name = naming.object_name("hardened-r0")
            service: Any = core.read_namespaced_service(name, NAMESPACE)
            address = str(service.spec.cluster_ip)
            models = wait_for(
                lambda: http_get(address, 8000, "/v1/models", bootstrapped.worker_secret_value),
                timeout=60,
                what=f"GET http://{address}:8000/v1/models",
            )
            assert models.status == 200 and model in models.body["data"][0]["root"]
            assert (refused := http_get(address, 8000, "/v1/models")) and refused.status == 401

            pid = wait_for(lambda: process_serving(model), timeout=30, what="the server process")
            assert proc_facts(pid) == {
                "Uid": str(USER),
                "Gid": str(USER),
                "Seccomp": "2",  # a filter: the runtime's default profile
                "NoNewPrivs": "1",
                "CapEff": "0" * 16,
                "CapPrm": "0" * 16,
                "/": "ro",
                "/tmp": "rw",
                "/home/runtime": "rw",
            }
            standin = http_get(address, 8000, "/standin")
            assert standin is not None and standin.body["dev_shm_bytes"] == 64 * 2**20
        finally:
            stack.destroy()
