"""Drift through the control plane's path (NamespaceStack), which reads the namespace once per
run: an object deleted out of band is found, recreated and reported; a foreign owner of our
field is refused without any refresh; no drift, no write, and no engine (a verified no-op).
Whatever an unchanged intent's objects went through (deleted, replaced by a look-alike, edited,
touched by another manager), the verified no-op never answers for them: the run takes the
engine's path, where the preflight decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercrane_pulumi.cluster import verdict
from infercrane_pulumi.cluster.api import APPLY_CONTENT_TYPE
from infercrane_pulumi.errors import OwnershipError
from infercrane_pulumi.objects import kinds, naming
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
    assert not result.verified_unchanged
    assert result.drift == (Drift("drift-b", "Service", name, fields=(), gone=True),)
    assert [(r.external_key, r.change) for r in result.replicas] == [
        ("drift-a", "same"),
        ("drift-b", "update"),
    ]
    service = harness.get(kinds.SERVICE, name)
    assert service is not None
    assert verdict.is_exactly_ours(service["metadata"], harness.namespace, "drift-b")

    before = harness.written()  # the controllers may still write status; a run may not
    quiet = stack.ensure(intents)
    assert quiet.drift == () and [r.change for r in quiet.replicas] == ["same", "same"]
    assert quiet.verified_unchanged
    assert harness.written() == before


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


def test_a_look_alike_put_in_place_of_our_object_is_refused_not_taken_for_ours(
    harness: Harness, tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "ws")
    stack.ensure([intent("drift-d")])
    name = naming.object_name("drift-d")
    path = kinds.SERVICE.path(harness.namespace, name)
    assert harness.admin.transport.request("DELETE", path).status == 200
    wait_for(lambda: harness.get(kinds.SERVICE, name) is None or None, timeout=30, what="gone")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": harness.namespace, "labels": {"team": "other"}},
        "spec": {"ports": [{"port": 80}]},
    }
    created = harness.admin.transport.request(
        "POST", kinds.SERVICE.collection(harness.namespace), body=service
    )
    assert created.status == 201, created.body

    with pytest.raises(OwnershipError) as refused:
        stack.ensure([intent("drift-d")])
    assert f"Service/{harness.namespace}/{name}: exists but is not exactly ours" in str(
        refused.value
    )
    live = harness.get(kinds.SERVICE, name)
    assert live is not None and live["metadata"]["uid"] == created.body["metadata"]["uid"]
    assert live["metadata"]["labels"] == {"team": "other"}


def test_another_manager_touching_only_metadata_is_refused_not_verified_away(
    harness: Harness, tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "ws")
    stack.ensure([intent("drift-e")])
    name = naming.object_name("drift-e")
    # `kubectl annotate`: no spec change, so the generation stays; pulumi-kubernetes would
    # rename this manager to its own on its next update, which the preflight refuses.
    touched = harness.admin.transport.request(
        "PATCH",
        kinds.DEPLOYMENT.path(harness.namespace, name),
        query=[("fieldManager", "kubectl")],
        body={"metadata": {"annotations": {"note": "looked at by a person"}}},
        content_type="application/merge-patch+json",
    )
    assert touched.status == 200, touched.body
    with pytest.raises(OwnershipError) as refused:
        stack.ensure([intent("drift-e")])
    assert "managed by 'kubectl' (Update)" in str(refused.value)
