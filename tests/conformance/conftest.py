"""Session fixtures: one local control plane, one Pulumi environment; a namespace per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from infercrane_pulumi import automation, kube
from infercrane_pulumi.localcluster import BinaryNotFoundError, LocalControlPlane, find_binary
from infercrane_pulumi.localcluster.bootstrap import Bootstrapped, bootstrap_namespace
from tests.conformance.harness import ROOT, Harness

REQUIRED_BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "pulumi",
    "pulumi-language-python",
    "pulumi-resource-kubernetes",
)


def _require_toolchain() -> Path:
    try:
        return (
            find_binary("pulumi").parent
            if all(find_binary(name) for name in REQUIRED_BINARIES)
            else Path()
        )
    except BinaryNotFoundError as missing:
        reason = f"hermetic toolchain missing ({missing}); run `make tools`"
        if os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def control_plane() -> Iterator[LocalControlPlane]:
    _require_toolchain()
    plane = LocalControlPlane().start()
    print(f"\nlocal control plane cold start: {plane.cold_start_seconds:.1f}s")
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def admin_client(control_plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    with control_plane.api_client(control_plane.admin_context) as api:
        yield api


@pytest.fixture(scope="session")
def provider_client(control_plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    with control_plane.api_client(control_plane.provider_context) as api:
        yield api


@pytest.fixture(scope="session")
def pulumi_env(
    control_plane: LocalControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> automation.PulumiEnvironment:
    return automation.PulumiEnvironment(
        state_dir=tmp_path_factory.mktemp("pulumi-state"),
        pulumi_home=ROOT / ".infercrane" / "pulumi-home",
        passphrase="conformance-only",
        bin_dir=_require_toolchain(),
        kubeconfig=control_plane.kubeconfig_path,
    )


def _bootstrap(admin_client: client.ApiClient, *, kserve: bool) -> Iterator[Bootstrapped]:
    namespace = f"ic-{uuid.uuid4().hex[:8]}"
    done = bootstrap_namespace(admin_client, namespace, kserve=kserve)
    yield done
    # Background deletion: the namespace controller finishes it; no test waits on it.
    client.CoreV1Api(admin_client).delete_namespace(namespace)


@pytest.fixture
def bootstrapped(admin_client: client.ApiClient) -> Iterator[Bootstrapped]:
    yield from _bootstrap(admin_client, kserve=False)


@pytest.fixture
def kserve_bootstrapped(admin_client: client.ApiClient) -> Iterator[Bootstrapped]:
    yield from _bootstrap(admin_client, kserve=True)


def _harness(
    control_plane: LocalControlPlane,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    namespace: str,
    tmp_path: Path,
) -> Harness:
    return Harness(
        control_plane=control_plane,
        env=pulumi_env,
        namespace=namespace,
        workdir=tmp_path,
        admin=kube.Cluster(kube.RestTransport(admin_client), context="admin"),
    )


@pytest.fixture
def harness(
    control_plane: LocalControlPlane,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    bootstrapped: Bootstrapped,
    tmp_path: Path,
) -> Harness:
    return _harness(control_plane, pulumi_env, admin_client, bootstrapped.namespace, tmp_path)


@pytest.fixture
def kserve_harness(
    control_plane: LocalControlPlane,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    kserve_bootstrapped: Bootstrapped,
    tmp_path: Path,
) -> Harness:
    return _harness(
        control_plane, pulumi_env, admin_client, kserve_bootstrapped.namespace, tmp_path
    )
