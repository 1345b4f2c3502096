"""Ownership through the real engine: foreign fields are never taken, foreign objects never adopted.

Scenarios 5 and 6 of the conformance issue. The foreign writes are made as admin with the
field managers real tools use; afterwards the foreign values must still be there.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.config.files import load_stack_file
from infercrane_pulumi.errors import OwnershipError
from infercrane_pulumi.objects import kinds, naming, workloads
from tests.conformance.harness import Harness, replica

pytestmark = pytest.mark.conformance


def _patch(
    admin_client: client.ApiClient,
    path: str,
    body: Any,
    content_type: str,
    query: list[tuple[str, str]],
) -> None:
    transport = RestTransport(admin_client)
    response = transport.request("PATCH", path, query=query, body=body, content_type=content_type)
    assert response.status == 200, response.body


def force_apply_replicas(admin_client: client.ApiClient, harness: Harness, manager: str) -> None:
    """What `kubectl apply --server-side --force-conflicts` (or an autoscaler) does."""
    name = naming.object_name("conflict-r0")
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": harness.namespace},
        "spec": {"replicas": 2},
    }
    _patch(
        admin_client,
        kinds.DEPLOYMENT.path(harness.namespace, name),
        body,
        "application/apply-patch+yaml",
        [("fieldManager", manager), ("force", "true")],
    )


def update_replicas(admin_client: client.ApiClient, harness: Harness, manager: str) -> None:
    """What `kubectl edit`, `kubectl scale` or client-side `kubectl apply` do: an Update."""
    name = naming.object_name("conflict-r0")
    _patch(
        admin_client,
        kinds.DEPLOYMENT.path(harness.namespace, name),
        {"spec": {"replicas": 2}},
        "application/merge-patch+json",
        [("fieldManager", manager)],
    )


@pytest.mark.parametrize(
    ("manager", "write"),
    [
        ("autoscaler-of-another-team", force_apply_replicas),
        ("kubectl", force_apply_replicas),
        ("kubectl-client-side-apply", update_replicas),
        ("kubectl-edit", update_replicas),
        ("kubectl", update_replicas),
    ],
    ids=["foreign-apply", "kubectl-ssa-force", "kubectl-csa", "kubectl-edit", "kubectl-update"],
)
def test_a_foreign_owner_of_our_field_fails_the_run_and_keeps_its_value(
    harness: Harness,
    admin_client: client.ApiClient,
    manager: str,
    write: Callable[[client.ApiClient, Harness, str], None],
) -> None:
    harness.configure([replica("conflict-r0")])
    harness.up()
    write(admin_client, harness, manager)

    with pytest.raises(OwnershipError) as refused:
        harness.up()
    message = str(refused.value)
    assert ".spec.replicas" in message
    assert repr(manager) in message or f'"{manager}"' in message
    live = harness.get(kinds.DEPLOYMENT, "conflict-r0")
    assert live is not None and live["spec"]["replicas"] == 2


def written_by_people(live: dict[str, Any] | None) -> str:
    """The object minus what controllers write (status, and its bookkeeping in metadata)."""
    assert live is not None
    meta = {
        k: v for k, v in live["metadata"].items() if k not in ("resourceVersion", "managedFields")
    }
    managers = sorted({entry["manager"] for entry in live["metadata"]["managedFields"]})
    return json.dumps(
        {"metadata": meta, "spec": live["spec"], "managers": managers}, sort_keys=True
    )


def _foreign(obj: dict[str, Any], mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    foreign = copy.deepcopy(obj)
    for key in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation"):
        foreign["metadata"].pop(key, None)
    foreign.pop("status", None)
    mutate(foreign["metadata"])
    return foreign


@pytest.mark.parametrize(
    "mutate",
    [
        lambda m: m["labels"].pop(naming.LABEL_MANAGED_BY),
        lambda m: m["labels"].__setitem__(naming.LABEL_MANAGED_BY, "helm"),
        lambda m: m["labels"].__setitem__(naming.LABEL_KEY_HASH, "0" * 24),
        lambda m: m["annotations"].pop(naming.ANNOTATION_EXTERNAL_KEY),
    ],
    ids=["no-managed-by", "managed-by-helm", "wrong-key-hash", "no-key-annotation"],
)
def test_a_foreign_object_at_our_name_is_refused_before_any_write(
    harness: Harness, admin_client: client.ApiClient, mutate: Callable[[dict[str, Any]], None]
) -> None:
    harness.configure([replica("squatted-r0")])
    deployment, _ = workloads.stack_objects(load_stack_file(harness.stack_file))
    foreign = _foreign(deployment, mutate)
    transport = RestTransport(admin_client)
    created = transport.request(
        "POST", kinds.DEPLOYMENT.collection(harness.namespace), body=foreign
    )
    assert created.status == 201, created.body
    before = written_by_people(harness.settled("squatted-r0"))

    for operation in (harness.preview, harness.up):
        with pytest.raises(OwnershipError) as refused:
            operation()
        assert "exists but is not exactly ours" in str(refused.value)
    # The Deployment controller keeps writing status; everything else must be as created.
    assert written_by_people(harness.get(kinds.DEPLOYMENT, "squatted-r0")) == before
    assert harness.get(kinds.SERVICE, "squatted-r0") is None
