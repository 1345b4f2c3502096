"""The local control plane against the real etcd / kube-apiserver / kube-controller-manager.

Proves what the project relies on: RBAC separates the admin from the provider
identity, the controller manager runs (Deployment -> ReplicaSet -> Pending Pod,
garbage collection, namespace deletion), CRDs can be installed, and stopping
leaves no process and no directory behind — both in-process and via the
detached ``up`` / ``down`` CLI.

Skips (never passes) when the binaries are absent; set
``INFERCRANE_REQUIRE_TOOLS=1`` to turn that skip into a failure (for CI).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from infercrane_pulumi.localcluster import (
    TOOLS_BIN_ENV,
    BinaryNotFoundError,
    ControlPlaneBinaries,
    LocalControlPlane,
    health,
    new_api_client,
)
from infercrane_pulumi.localcluster.binaries import repo_root
from infercrane_pulumi.localcluster.processes import group_members
from infercrane_pulumi.localcluster.state import load_state

pytestmark = pytest.mark.conformance

REQUIRE_ENV = "INFERCRANE_REQUIRE_TOOLS"
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


@pytest.fixture(scope="module")
def binaries() -> ControlPlaneBinaries:
    try:
        return ControlPlaneBinaries.discover()
    except BinaryNotFoundError as exc:
        # The error already names INFERCRANE_TOOLS_BIN and hack/tools/build.sh.
        reason = f"local control plane unavailable: {exc}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def plane(
    binaries: ControlPlaneBinaries, pytestconfig: pytest.Config
) -> Iterator[LocalControlPlane]:
    cluster = LocalControlPlane(binaries=binaries, startup_timeout=180)
    cluster.start()
    # Shown even without -s: cold start time is a tracked number.
    _show(pytestconfig, f"local control plane cold start: {cluster.cold_start_seconds:.1f}s")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def admin(plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    with plane.api_client(plane.admin_context) as api:
        yield api


@pytest.fixture(scope="module")
def provider(plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    with plane.api_client(plane.provider_context) as api:
        yield api


def _show(config: pytest.Config, text: str) -> None:
    # Printed past pytest's capture so the number appears in every run's output.
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\n{text}", flush=True)


def _meta(obj: Any) -> client.V1ObjectMeta:
    meta = obj.metadata
    assert isinstance(meta, client.V1ObjectMeta)
    return meta


def eventually(fn: Callable[[], T | None], *, timeout: float = 90, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)


def _self_review(api: client.ApiClient) -> client.V1UserInfo:
    review = client.AuthenticationV1Api(api).create_self_subject_review(
        client.V1SelfSubjectReview(api_version="authentication.k8s.io/v1", kind="SelfSubjectReview")
    )
    assert review.status is not None and review.status.user_info is not None
    return review.status.user_info


def _namespace(api: client.ApiClient, name: str) -> None:
    client.CoreV1Api(api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
    )


def test_readyz(plane: LocalControlPlane) -> None:
    pki = plane.workdir / "pki"
    tls = health.client_tls_context(pki / "ca.crt", pki / "admin.crt", pki / "admin.key")
    port = int(plane.server.rsplit(":", 1)[1])
    status, body = health.http_get(port, "/readyz", tls=tls)
    assert (status, body) == (200, b"ok")
    assert plane.server.startswith("https://127.0.0.1:")


def test_identities_are_who_we_think(admin: client.ApiClient, provider: client.ApiClient) -> None:
    admin_info = _self_review(admin)
    assert admin_info.username == "infercrane-admin"
    assert "system:masters" in (admin_info.groups or [])
    provider_info = _self_review(provider)
    assert provider_info.username == "infercrane-provider"
    assert set(provider_info.groups or []) == {"system:authenticated"}


def test_admin_is_admin_and_provider_is_not(
    admin: client.ApiClient, provider: client.ApiClient
) -> None:
    _namespace(admin, "conformance-rbac")
    admin_core = client.CoreV1Api(admin)
    admin_core.create_namespaced_secret(
        "conformance-rbac",
        client.V1Secret(metadata=client.V1ObjectMeta(name="s"), string_data={"k": "v"}),
    )
    assert "conformance-rbac" in {_meta(ns).name for ns in admin_core.list_namespace().items}
    assert (admin_core.read_namespaced_secret("s", "conformance-rbac").data or {})["k"]

    provider_core = client.CoreV1Api(provider)
    for call in (
        provider_core.list_namespace,
        lambda: provider_core.read_namespaced_secret("s", "conformance-rbac"),
        lambda: provider_core.list_namespaced_secret("conformance-rbac"),
        lambda: provider_core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name="provider-made"))
        ),
    ):
        with pytest.raises(ApiException) as info:
            call()
        assert info.value.status == 403, info.value.body


def test_deployment_gets_replicaset_and_pending_pod(admin: client.ApiClient) -> None:
    ns = "conformance-workloads"
    _namespace(admin, ns)
    apps = client.AppsV1Api(admin)
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

    rs = eventually(owned_replicaset, what="a ReplicaSet owned by the Deployment")
    core = client.CoreV1Api(admin)
    pods = eventually(
        lambda: core.list_namespaced_pod(ns).items, what="the ReplicaSet to create a Pod"
    )
    pod = pods[0]
    assert [r.uid for r in _meta(pod).owner_references or []] == [_meta(rs).uid]
    # No scheduler and no node: Pending forever is the intended state.
    assert pod.status is not None and pod.status.phase == "Pending"
    assert pod.spec is not None and not pod.spec.node_name

    # Garbage collector: deleting the owner removes the ReplicaSet (and its Pod).
    apps.delete_namespaced_deployment("web", ns, propagation_policy="Background")
    eventually(
        lambda: not apps.list_namespaced_replica_set(ns).items or None,
        what="garbage collection of the ReplicaSet",
    )


def test_namespace_deletion_completes(admin: client.ApiClient) -> None:
    ns = "conformance-doomed"
    _namespace(admin, ns)
    core = client.CoreV1Api(admin)
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

    eventually(gone, what=f"namespace {ns} to be finalized by the namespace controller")


def test_install_crd(plane: LocalControlPlane, admin: client.ApiClient, tmp_path: Path) -> None:
    path = tmp_path / "widget-crd.yaml"
    path.write_text(WIDGET_CRD)
    assert plane.install_crd(path) == ["widgets.conformance.infercrane.dev"]
    assert plane.install_crd(path) == ["widgets.conformance.infercrane.dev"]  # re-apply is fine
    _namespace(admin, "conformance-crd")
    client.CustomObjectsApi(admin).create_namespaced_custom_object(
        "conformance.infercrane.dev",
        "v1",
        "conformance-crd",
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
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def test_stop_leaves_nothing_behind(plane: LocalControlPlane) -> None:
    processes = plane.processes
    assert [p.name for p in processes] == ["etcd", "kube-apiserver", "kube-controller-manager"]
    workdir = plane.workdir
    assert _processes_mentioning(str(workdir))

    plane.stop()

    for process in processes:
        assert group_members(process.pgid) == [], process.name
        assert not process.is_running(), process.name
    assert _processes_mentioning(str(workdir)) == []
    assert not workdir.exists()


def _cli(binaries: ControlPlaneBinaries, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, TOOLS_BIN_ENV: str(binaries.etcd.parent)}
    return subprocess.run(
        [sys.executable, "-m", "infercrane_pulumi.localcluster", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=repo_root(),
        env=env,
        check=False,
    )


def test_cli_up_down_round_trip(
    binaries: ControlPlaneBinaries, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    state_dir = tmp_path / "state"
    up = _cli(binaries, "up", "--dir", str(state_dir))
    assert up.returncode == 0, up.stderr
    _show(pytestconfig, f"`up` output:\n{up.stdout}")
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
        down = _cli(binaries, "down", "--dir", str(state_dir))
    assert down.returncode == 0, down.stderr
    for process in state.processes:
        assert group_members(process.pgid) == [], process.name
    assert _processes_mentioning(str(state.workdir)) == []
    assert not state_dir.exists()
    again = _cli(binaries, "down", "--dir", str(state_dir))
    assert again.returncode == 0, again.stderr
