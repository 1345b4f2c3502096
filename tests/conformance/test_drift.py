"""Drift through the control plane's path (NamespaceStack), which refreshes only when two
metadata LISTs find the cluster drifted: an object deleted out of band is found, recreated and
reported; a foreign owner of our field is refused without any refresh; no drift, no write."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercrane_pulumi import kinds, naming
from infercrane_pulumi.cluster.client import APPLY_CONTENT_TYPE
from infercrane_pulumi.errors import OwnershipError
from infercrane_pulumi.review.changes import Drift
from tests.conformance.harness import Harness, intent, wait_for

pytestmark = pytest.mark.conformance


def test_a_service_deleted_out_of_band_is_found_recreated_and_reported(
    harness: Harness, tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "ws")
    intents = [intent("drift-a"), intent("drift-b")]
    stack.ensure(intents)
    name = naming.object_name("drift-b")
    gone = harness.admin.transport.request("DELETE", kinds.SERVICE.path(harness.namespace, name))
    assert gone.status == 200
    wait_for(lambda: harness.get(kinds.SERVICE, name) is None or None, timeout=30, what="gone")

    result = stack.ensure(intents)
    assert result.drift == (Drift("drift-b", "Service", name, fields=(), gone=True),)
    assert [(r.external_key, r.change) for r in result.replicas] == [
        ("drift-a", "same"),
        ("drift-b", "update"),
    ]
    service = harness.get(kinds.SERVICE, name)
    assert service is not None
    assert naming.is_exactly_ours(service["metadata"], harness.namespace, "drift-b")

    before = harness.resource_versions()
    quiet = stack.ensure(intents)
    assert quiet.drift == () and [r.change for r in quiet.replicas] == ["same", "same"]
    assert harness.resource_versions() == before


def test_a_foreign_owner_of_our_field_is_refused_and_keeps_its_value(
    harness: Harness, tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "ws")
    stack.ensure([intent("drift-c")])
    name = naming.object_name("drift-c")
    taken = harness.admin.transport.request(
        "PATCH",
        kinds.DEPLOYMENT.path(harness.namespace, name),
        query=[("fieldManager", "autoscaler-of-another-team"), ("force", "true")],
        body={
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": harness.namespace},
            "spec": {"replicas": 2},
        },
        content_type=APPLY_CONTENT_TYPE,
    )
    assert taken.status == 200, taken.body

    with pytest.raises(OwnershipError) as refused:
        stack.ensure([intent("drift-c")])
    assert ".spec.replicas" in str(refused.value)
    assert "autoscaler-of-another-team" in str(refused.value)
    live = harness.get(kinds.DEPLOYMENT, name)
    assert live is not None and live["spec"]["replicas"] == 2
