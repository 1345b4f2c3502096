"""Session fixtures: one backend (the suite's own local control plane, or an existing cluster
named by ``make conformance``), one Pulumi environment; a namespace and provider per test.

An existing cluster is preflighted while pytest configures, before collection: a missing
context or a non-admin one ends the run in one line and nothing is created.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from infercrane_dev.statestores import postgres, s3
from infercrane_dev.statestores.postgres import PostgresServer
from infercrane_dev.statestores.s3 import S3Server
from infercrane_pulumi import automation
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.config.intents import WorkloadApiName
from tests.conformance.backends import Backend, Tenant, connect, open_backend
from tests.conformance.gpus import GpuSupply, Pools
from tests.conformance.harness import (
    ENGINE_BINARIES,
    ROOT,
    Harness,
    engine_cli,
    require_toolchain,
    show,
    unavailable,
)
from tests.conformance.identity import KubeconfigError
from tests.conformance.ledger import RunLedger
from tests.conformance.preflight import PreflightError
from tests.conformance.realnode import RealNode, add_real_node
from tests.conformance.target import ExternalTarget, TargetError, target_from_env

TARGET = pytest.StashKey[ExternalTarget | None]()


def pytest_configure(config: pytest.Config) -> None:
    try:
        target = target_from_env(os.environ)
        if target is not None:
            connect(target).admin.close()  # type: ignore[no-untyped-call]
    except (TargetError, KubeconfigError, PreflightError) as refused:
        raise pytest.UsageError(f"conformance: {refused}") from None
    config.stash[TARGET] = target


@pytest.fixture(scope="session")
def backend(pytestconfig: pytest.Config) -> Iterator[Backend]:
    with open_backend(pytestconfig.stash[TARGET], functools.partial(show, pytestconfig)) as opened:
        yield opened


@pytest.fixture(scope="session")
def admin_client(backend: Backend) -> client.ApiClient:
    return backend.admin


@pytest.fixture(scope="session")
def ledger(backend: Backend) -> RunLedger:
    return backend.ledger


@pytest.fixture(scope="session")
def pulumi_env(tmp_path_factory: pytest.TempPathFactory) -> automation.PulumiEnvironment:
    """Shared state backend and plugins; each harness adds its own provider kubeconfig."""
    return automation.PulumiEnvironment(
        state_dir=tmp_path_factory.mktemp("pulumi-state"),
        pulumi_home=ROOT / ".infercrane" / "pulumi-home",
        passphrase="conformance-only",
        bin_dir=require_toolchain(ENGINE_BINARIES),
    )


def _tenant(
    backend: Backend,
    workdir: Path,
    *,
    workload_api: WorkloadApiName = "deployment",
    observe: bool = False,
) -> Iterator[Tenant]:
    made = backend.tenant(workdir, workload_api=workload_api, observe=observe)
    yield made
    made.provider.kubeconfig.unlink(missing_ok=True)
    # Background deletion: the session's sweep waits for it, no test does.
    backend.ledger.delete_namespace(made.namespace)


@pytest.fixture
def tenant(backend: Backend, tmp_path: Path) -> Iterator[Tenant]:
    yield from _tenant(backend, tmp_path)


@pytest.fixture
def observing_tenant(backend: Backend, tmp_path: Path) -> Iterator[Tenant]:
    """A namespace whose provider may also read Pods (the optional observe Role)."""
    yield from _tenant(backend, tmp_path, observe=True)


@pytest.fixture
def kserve_tenant(backend: Backend, tmp_path: Path) -> Iterator[Tenant]:
    yield from _tenant(backend, tmp_path, workload_api="kserve")


@pytest.fixture
def provider_client(tenant: Tenant) -> Iterator[client.ApiClient]:
    with tenant.provider.api_client() as api:
        yield api


def _harness(
    tenant: Tenant,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    workdir: Path,
) -> Harness:
    return Harness(
        provider=tenant.provider,
        env=dataclasses.replace(pulumi_env, kubeconfig=tenant.provider.kubeconfig),
        namespace=tenant.namespace,
        workdir=workdir,
        admin=Cluster(RestTransport(admin_client), context="admin"),
    )


@pytest.fixture
def harness(
    request: pytest.FixtureRequest,
    tenant: Tenant,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    tmp_path: Path,
) -> Harness:
    """On the pinned Pulumi CLI, or on each of ``ENGINE_CLIS`` when a test parametrizes it."""
    env = dataclasses.replace(pulumi_env, bin_dir=engine_cli(getattr(request, "param", "pinned")))
    return _harness(tenant, env, admin_client, tmp_path)


@pytest.fixture
def observing_harness(
    observing_tenant: Tenant,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    tmp_path: Path,
) -> Harness:
    return _harness(observing_tenant, pulumi_env, admin_client, tmp_path)


@pytest.fixture
def kserve_harness(
    kserve_tenant: Tenant,
    pulumi_env: automation.PulumiEnvironment,
    admin_client: client.ApiClient,
    tmp_path: Path,
) -> Harness:
    return _harness(kserve_tenant, pulumi_env, admin_client, tmp_path)


@pytest.fixture
def pools(backend: Backend) -> Iterator[Pools]:
    """Simulated GPU node pools this test may add and delete; skips off the local backend."""
    with backend.pools() as made:
        yield made


@pytest.fixture(scope="module")
def real_node(backend: Backend) -> Iterator[RealNode]:
    """This machine as a node of the suite's control plane, whose Pods really run, for the
    tests of one module (one real node per machine: the demo, say, may need it next)."""
    plane = backend.local("a real node is this machine, a node of the local control plane")
    yield add_real_node(plane)
    plane.remove_real_node()


@pytest.fixture
def gpu(backend: Backend) -> Iterator[GpuSupply]:
    """Schedulable GPU nodes: made locally, found (or skipped for) on an existing cluster."""
    with backend.gpu_supply() as supply:
        yield supply


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """The session's throwaway PostgreSQL (shared state and leases), removed at the end."""
    try:
        server = postgres.create()
    except postgres.PostgresUnavailable as missing:
        unavailable(str(missing))
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """The session's throwaway S3 server (versitygw over a private directory)."""
    require_toolchain(("versitygw",))
    with s3.running() as server:
        yield server


@pytest.fixture
def tenants(backend: Backend, tmp_path: Path) -> Iterator[Callable[[int], list[Tenant]]]:
    """More namespaces for one test, each with its own provider identity; removed after it."""
    made: list[Tenant] = []

    def make(count: int) -> list[Tenant]:
        batch = [backend.tenant(tmp_path / f"tenant-{len(made) + i}") for i in range(count)]
        made.extend(batch)
        return batch

    yield make
    for tenant in made:
        backend.ledger.delete_namespace(tenant.namespace)
