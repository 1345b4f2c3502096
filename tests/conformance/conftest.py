"""Session fixtures: one local control plane, one Pulumi environment; a namespace per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import Bootstrapped, bootstrap_namespace
from infercrane_pulumi import automation
from infercrane_pulumi.cluster.client import Cluster, RestTransport
from tests.conformance.harness import ROOT, Harness, require_toolchain, show


@pytest.fixture(scope="session")
def control_plane(pytestconfig: pytest.Config) -> Iterator[LocalControlPlane]:
    require_toolchain()
    # Scheduling on (kube-scheduler + kwok), but no node until a test adds a pool of its own
    # GPU product: the other tests' Pods stay Pending, as before.
    plane = LocalControlPlane(scheduling=True).start()
    show(pytestconfig, f"local control plane cold start: {plane.cold_start_seconds:.1f}s")
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
        bin_dir=require_toolchain(),
        kubeconfig=control_plane.kubeconfig_path,
    )


def _bootstrap(
    admin_client: client.ApiClient, *, kserve: bool = False, observe: bool = False
) -> Iterator[Bootstrapped]:
    namespace = f"ic-{uuid.uuid4().hex[:8]}"
    done = bootstrap_namespace(
        admin_client, namespace, deploy_dir=DEPLOY_DIR, kserve=kserve, observe=observe
    )
    yield done
    # Background deletion: the namespace controller finishes it; no test waits on it.
    client.CoreV1Api(admin_client).delete_namespace(namespace)


@pytest.fixture
def bootstrapped(admin_client: client.ApiClient) -> Iterator[Bootstrapped]:
    yield from _bootstrap(admin_client)


@pytest.fixture
def observing_bootstrapped(admin_client: client.ApiClient) -> Iterator[Bootstrapped]:
    """A namespace whose provider may also read Pods (the optional observe Role)."""
    yield from _bootstrap(admin_client, observe=True)


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
        admin=Cluster(RestTransport(admin_client), context="admin"),
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
def observing_harness(
    control_plane: LocalControlPlane,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    observing_bootstrapped: Bootstrapped,
    tmp_path: Path,
) -> Harness:
    return _harness(
        control_plane, pulumi_env, admin_client, observing_bootstrapped.namespace, tmp_path
    )


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
