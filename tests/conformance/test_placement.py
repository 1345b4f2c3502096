"""Issue 59: a stack records the cluster it applied to, and a run that reaches another cluster's
namespace of the same name (a fleet of clusters whose runners share one state database) is
refused before anything is written there, or forgotten here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_pulumi.automation import stacks
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.objects import kinds
from tests.conformance.harness import Harness, replica
from tests.conformance.identity import cluster_entry, issue

pytestmark = pytest.mark.conformance


@pytest.fixture
def another_cluster() -> Iterator[LocalControlPlane]:
    """A second local control plane, as another cluster of the fleet (no scheduler: its
    objects need not run)."""
    plane = LocalControlPlane(scheduling=False).start()
    try:
        yield plane
    finally:
        plane.stop()


def test_a_run_reaching_another_clusters_namespace_is_refused_and_changes_nothing(
    harness: Harness,
    admin_client: client.ApiClient,
    another_cluster: LocalControlPlane,
    tmp_path: Path,
) -> None:
    harness.configure([replica("fleet-a")])
    harness.up()
    recorded = stacks.applied(harness.stack()).cluster
    namespace = client.CoreV1Api(admin_client).read_namespace(harness.namespace)
    assert recorded is not None and namespace.metadata is not None
    assert recorded.namespace_uid == namespace.metadata.uid
    ours = harness.get(kinds.DEPLOYMENT, "fleet-a")
    assert ours is not None

    # The same namespace in another cluster, bootstrapped as the docs say, its own identity.
    with another_cluster.api_client(another_cluster.admin_context) as admin:
        bootstrap_namespace(admin, harness.namespace, deploy_dir=DEPLOY_DIR, bind_to=())
        entry = cluster_entry(str(another_cluster.kubeconfig_path), another_cluster.admin_context)
        elsewhere = issue(admin, entry, harness.namespace, tmp_path / "elsewhere.kubeconfig")
        harness.configure(
            [replica("fleet-a"), replica("fleet-b")], kubeconfig=str(elsewhere.kubeconfig)
        )
        with pytest.raises(ConfigError) as refused:
            harness.up()
        [line] = refused.value.problems
        assert line.startswith(f"stack {harness.stack_name}: applied to another cluster")
        assert recorded.namespace_uid is not None and recorded.namespace_uid in line
        there = client.AppsV1Api(admin).list_namespaced_deployment(harness.namespace)
        assert there.items == []

    # Here, all as it was: the object, and the stack's record of it.
    harness.configure([replica("fleet-a")])
    again = harness.up()
    assert [(r.external_key, r.change) for r in again.replicas] == [("fleet-a", "same")]
    now = harness.get(kinds.DEPLOYMENT, "fleet-a")
    assert now is not None and now["metadata"]["uid"] == ours["metadata"]["uid"]
