"""The local control plane against the real etcd / kube-apiserver / kube-controller-manager.

Proves what the project relies on: RBAC separates the admin from the provider
identity, the controller manager runs (Deployment -> ReplicaSet -> Pending Pod,
garbage collection, namespace deletion), CRDs can be installed, and stopping
leaves no process and no directory behind — both in-process (with and without
scheduling) and via the detached ``up`` / ``down`` CLI, including ``up --node-pool``
and the node subcommands.  Scheduling itself: ``test_localcluster_scheduling.py``.

Skips (never passes) when the binaries are absent; set
``INFERCRANE_REQUIRE_TOOLS=1`` to turn that skip into a failure (for CI). Runs only on the
local backend: against an existing cluster there is no local control plane to test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from infercrane_dev.localcluster import LocalControlPlane, health, new_api_client
from infercrane_dev.localcluster.processes import group_members, is_alive
from infercrane_dev.localcluster.state import load_state
from infercrane_dev.toolchain import TOOLS_BIN_ENV, repo_root
from tests.conformance.backends import Backend
from tests.conformance.harness import require_toolchain, show, wait_for
from tests.conformance.ledger import RunLedger

pytestmark = pytest.mark.conformance

T = TypeVar("T")

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.conformance.infercrane.dev
spec:
  group: conformance.infercrane.dev
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"""


@pytest.fixture(scope="module", autouse=True)
def plane(backend: Backend) -> LocalControlPlane:
    """The session's local control plane; every test here skips on another backend."""
    return backend.local("tests the local control plane itself (started only by the local run)")


@pytest.fixture(scope="module")
def plane_admin(plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    with plane.api_client(plane.admin_context) as api:
        yield api


@pytest.fixture(scope="module")
def plane_provider(plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    """The plane's own client-certificate provider user (the suite's provider is a
    ServiceAccount; this context is what ``make demo`` and ``up`` users get)."""
    with plane.api_client(plane.provider_context) as api:
        yield api


def _meta(obj: Any) -> client.V1ObjectMeta:
    meta = obj.metadata
    assert isinstance(meta, client.V1ObjectMeta)
    return meta


def _self_review(api: client.ApiClient) -> client.V1UserInfo:
    review = client.AuthenticationV1Api(api).create_self_subject_review(
        client.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview")
    )
    assert review.status is not None and review.status.user_info is not None
    return review.status.user_info


def test_readyz(plane: LocalControlPlane) -> None:
    pki = plane.workdir / "pki"
    tls = health.client_tls_context(pki / "ca.crt", pki / "admin.crt", pki / "admin.key")
    port = int(plane.server.rsplit(":", 1)[1])
    status, body = health.http_get(port, "/readyz", tls=tls)
    assert (status, body) == (200, b"ok")
    assert plane.server.startswith("https://127.0.0.1:")


def test_identities_are_who_we_think(
    plane_admin: client.ApiClient, plane_provider: client.ApiClient
) -> None:
    admin_info = _self_review(plane_admin)
    assert admin_info.username == "infercrane-admin"
    assert "system:masters" in (admin_info.groups or [])
    provider_info = _self_review(plane_provider)
    assert provider_info.username == "infercrane-provider"
    assert set(provider_info.groups or []) == {"system:authenticated"}


def test_admin_is_admin_and_provider_is_not(
    plane_admin: client.ApiClient, plane_provider: client.ApiClient, ledger: RunLedger
) -> None:
    ns = ledger.create_namespace("conformance-rbac")
    admin_core = client.CoreV1Api(plane_admin)
    admin_core.create_namespaced_secret(
        ns, client.V1Secret(metadata=client.V1ObjectMeta(name="s"), string_data={"k": "v"})
    )
    assert ns in {_meta(item).name for item in admin_core.list_namespace().items}
    assert (admin_core.read_namespaced_secret("s", ns).data or {})["k"]

    provider_core = client.CoreV1Api(plane_provider)
    for call in (
        provider_core.list_namespace,
        lambda: provider_core.read_namespaced_secret("s", ns),
        lambda: provider_core.list_namespaced_secret(ns),
        lambda: provider_core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="provider-made"))
        ),
    ):
        with pytest.raises(ApiException) as info:
            call()
        assert info.value.status == 403, info.value.body


def test_deployment_gets_replicaset_and_pending_pod(
    plane_admin: client.ApiClient, ledger: RunLedger
) -> None:
    ns = ledger.create_namespace("conformance-workloads")
    apps = client.AppsV1Api(plane_admin)
    labels = {"app": "web"}
    deployment = apps.create_namespaced_deployment(
        ns,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="web"),
            spec=client.V1DeploymentSpec(
                replicas=1,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(
                        containers=[client.V1Container(name="c", image="example.invalid/none:1")]
                    ),
                ),
            ),
        ),
    )
    deployment_uid = _meta(deployment).uid

    def owned_replicaset() -> client.V1ReplicaSet | None:
        for rs in apps.list_namespaced_replica_set(ns).items:
            if any(r.uid == deployment_uid for r in _meta(rs).owner_references or []):
                return rs
        return None

    rs = wait_for(owned_replicaset, timeout=90, what="a ReplicaSet owned by the Deployment")
    core = client.CoreV1Api(plane_admin)
    pods = wait_for(
        lambda: core.list_namespaced_pod(ns).items,
        timeout=90,
        what="the ReplicaSet to create a Pod",
    )
    pod = pods[0]
    assert [r.uid for r in _meta(pod).owner_references or []] == [_meta(rs).uid]
    # No scheduler and no node: Pending forever is the intended state.
    assert pod.status is not None and pod.status.phase == "Pending"
    assert pod.spec is not None and not pod.spec.node_name

    # Garbage collector: deleting the owner removes the ReplicaSet (and its Pod).
    apps.delete_namespaced_deployment("web", ns, propagation_policy="Background")
    wait_for(
        lambda: not apps.list_namespaced_replica_set(ns).items or None,
        timeout=90,
        what="garbage collection of the ReplicaSet",
    )


def test_namespace_deletion_completes(plane_admin: client.ApiClient, ledger: RunLedger) -> None:
    ns = ledger.create_namespace("conformance-doomed")
    core = client.CoreV1Api(plane_admin)
    core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm"), data={"a": "b"})
    )
    core.delete_namespace(ns)

    def gone() -> bool:
        try:
            core.read_namespace(ns)
        except ApiException as exc:
            return bool(exc.status == 404)
        return False

    wait_for(gone, timeout=90, what=f"namespace {ns} to be finalized by the namespace controller")


def test_install_crd(
    plane: LocalControlPlane, plane_admin: client.ApiClient, ledger: RunLedger, tmp_path: Path
) -> None:
    path = tmp_path / "widget-crd.yaml"
    path.write_text(WIDGET_CRD)
    names = ["widgets.conformance.infercrane.dev"]
    assert plane.install_crd(path, labels=ledger.labels) == names
    # Re-applying is fine.
    assert plane.install_crd(path, labels=ledger.labels) == names
    ns = ledger.create_namespace("conformance-crd")
    client.CustomObjectsApi(plane_admin).create_namespaced_custom_object(
        "conformance.infercrane.dev",
        "v1",
        ns,
        "widgets",
        {
            "apiVersion": "conformance.infercrane.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
        },
    )


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if text in cmdline and is_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("scheduling", [False, True], ids=["plain", "scheduling"])
def test_stop_leaves_nothing_behind(scheduling: bool, pytestconfig: pytest.Config) -> None:
    require_toolchain()
    plane = LocalControlPlane(scheduling=scheduling).start()
    show(pytestconfig, f"cold start (scheduling={scheduling}): {plane.cold_start_seconds:.1f}s")
    processes = plane.processes
    extra = ["kube-scheduler", "kwok"] if scheduling else []
    assert [p.name for p in processes] == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        *extra,
    ]
    workdir = plane.workdir
    assert _processes_mentioning(str(workdir))

    plane.stop()

    for process in processes:
        assert group_members(process.pgid) == [], process.name
        assert not process.is_running(), process.name
    assert _processes_mentioning(str(workdir)) == []
    assert not workdir.exists()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, TOOLS_BIN_ENV: str(require_toolchain())}
    return subprocess.run(
        [sys.executable, "-m", "infercrane_dev.localcluster", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=repo_root(),
        env=env,
        check=False,
    )


def test_cli_up_down_round_trip(tmp_path: Path, pytestconfig: pytest.Config) -> None:
    state_dir = tmp_path / "state"
    up = _cli("up", "--dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    show(pytestconfig, f"`up` output:\n{up.stdout}")
    state = load_state(state_dir)
    assert state is not None
    try:
        assert f"kubeconfig: {state.kubeconfig_path}" in up.stdout
        # The command has exited; the daemons must still be serving.
        assert all(p.is_running() for p in state.processes)
        with new_api_client(state.kubeconfig_path, state.admin_context) as api:
            names = {_meta(ns).name for ns in client.CoreV1Api(api).list_namespace().items}
            assert "kube-system" in names
        with new_api_client(state.kubeconfig_path, state.provider_context) as api:
            with pytest.raises(ApiException) as info:
                client.CoreV1Api(api).list_namespace()
            assert info.value.status == 403
    finally:
        down = _cli("down", "--dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    for process in state.processes:
        assert group_members(process.pgid) == [], process.name
    assert _processes_mentioning(str(state.workdir)) == []
    assert not state_dir.exists()
    again = _cli("down", "--dir", str(state_dir))
    assert again.returncode == 0, again.stderr


def test_cli_up_with_node_pools_and_node_commands(
    tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    state_dir = tmp_path / "state"
    up = _cli(
        "up",
        "--dir",
        str(state_dir),
        "--node-pool",
        "NVIDIA-L40S=2x1",
        "--node-pool",
        "NVIDIA-H100-80GB-HBM3=1x8",
    )
    assert up.returncode == 0, up.stderr
    show(pytestconfig, f"`up --node-pool` output:\n{up.stdout}")
    state = load_state(state_dir)
    assert state is not None
    try:
        assert state.scheduling
        assert [p.name for p in state.processes][-2:] == ["kube-scheduler", "kwok"]
        assert "node pool: NVIDIA-L40S=2x1 (nvidia.com/gpu.product=NVIDIA-L40S)" in up.stdout
        listed = _cli("nodes", "--dir", str(state_dir))
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines()[1:] == [
            f"{'gpu-nvidia-h100-80gb-hbm3-0':<40} {'NVIDIA-H100-80GB-HBM3':<32} {8:>4} yes",
            f"{'gpu-nvidia-l40s-0':<40} {'NVIDIA-L40S':<32} {1:>4} yes",
            f"{'gpu-nvidia-l40s-1':<40} {'NVIDIA-L40S':<32} {1:>4} yes",
        ]
        added = _cli("add-pool", "--dir", str(state_dir), "--node-pool", "NVIDIA-L40S=1x1")
        assert (added.returncode, added.stdout) == (0, "added NVIDIA-L40S=1x1: gpu-nvidia-l40s-2\n")
        deleted = _cli("delete-node", "gpu-nvidia-l40s-0", "--dir", str(state_dir))
        assert (deleted.returncode, deleted.stdout) == (0, "deleted node gpu-nvidia-l40s-0\n")
        missing = _cli("delete-node", "gpu-nvidia-l40s-0", "--dir", str(state_dir))
        assert missing.returncode == 1
        assert (
            missing.stderr
            == "localcluster: delete-node failed: node gpu-nvidia-l40s-0 does not exist\n"
        )
        l40s = _cli("nodes", "--dir", str(state_dir), "--product", "NVIDIA-L40S")
        assert [line.split()[0] for line in l40s.stdout.splitlines()[1:]] == [
            "gpu-nvidia-l40s-1",
            "gpu-nvidia-l40s-2",
        ]
    finally:
        down = _cli("down", "--dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    for process in state.processes:
        assert group_members(process.pgid) == [], process.name
    assert _processes_mentioning(str(state.workdir)) == []
    assert not state_dir.exists()
