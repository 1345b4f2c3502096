"""The fault-injection matrix's own fixture (the conformance suite's session, its backend,
namespaces and state servers, come from the parent conftest): one namespace of another stack
that no cell may touch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client

from infercrane_pulumi import automation
from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.cluster.client import Cluster, RestTransport
from infercrane_pulumi.intents import KubernetesSettings, ReplicaIntent
from tests.conformance import conftest as conformance
from tests.conformance.backends import Backend
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
