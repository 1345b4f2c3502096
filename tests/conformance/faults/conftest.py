"""The fault-injection tests' own fixtures (the conformance suite's session, its backend,
namespaces and state servers, come from the parent conftest): one namespace of another stack
that no cell may touch, and where each test runs (``site``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_pulumi import automation
from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from tests.conformance import conftest as conformance
from tests.conformance.backends import Backend, Tenant
from tests.conformance.faults.checker import ObjectId, fingerprints, intent, listed
from tests.conformance.test_shared_state import admin, settings_of

__all__ = ["admin"]  # the shared-state scenarios' admin reader, a fixture here too

# The keys every cell uses: the other namespace's objects have the very names of the cells'.
ELSEWHERE_KEYS = ("a", "b")


@dataclass(frozen=True)
class Elsewhere:
    """Another stack's namespace and its objects' fingerprints (``checker.fingerprint``)."""

    namespace: str
    objects: dict[ObjectId, str]


@pytest.fixture(scope="module")
def elsewhere(
    backend: Backend,
    admin_client: client.ApiClient,
    pulumi_env: automation.PulumiEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Elsewhere]:
    """A namespace whose stack (on the session's file backend) holds the cells' keys."""
    workdir: Path = tmp_path_factory.mktemp("elsewhere")
    for other in conformance._tenant(backend, workdir):
        settings = KubernetesSettings.model_validate(settings_of(other))
        stack = NamespaceStack(settings, pulumi_env, workdir / "workspace")
        stack.ensure([ReplicaIntent.model_validate(intent(key)) for key in ELSEWHERE_KEYS])
        found = listed(Cluster(RestTransport(admin_client), context="admin"), other.namespace)
        yield Elsewhere(other.namespace, fingerprints(found))


@dataclass(frozen=True)
class Site:
    """Where a cell runs: its namespace (read as admin), its drivers' directory, and the other
    stack's namespace."""

    tenant: Tenant
    admin: Cluster
    elsewhere: Elsewhere
    directory: Path

    @property
    def namespace(self) -> str:
        return self.tenant.namespace

    @property
    def settings(self) -> dict[str, Any]:
        return settings_of(self.tenant)


@pytest.fixture
def site(tenant: Tenant, admin: Cluster, elsewhere: Elsewhere, tmp_path: Path) -> Site:
    return Site(tenant, admin, elsewhere, tmp_path)
