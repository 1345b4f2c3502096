"""The run's own deletions: every object at once, each only if it is still the one checked."""

from __future__ import annotations

from typing import Any

import pytest

from infercrane_pulumi.cluster.actions import Doomed
from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.cluster.deletion import delete_all
from infercrane_pulumi.cluster.verdict import judge
from infercrane_pulumi.errors import OwnershipError
from infercrane_pulumi.objects.workloads import KINDS, render
from tests.unit.fake_cluster import NS, Deleting, config
from tests.unit.test_run import STACK, applied


def everything(live: list[dict[str, Any]]) -> list[Doomed]:
    """Every object of the stack in ``live``, as a destroy deletes them."""
    snapshot = {
        kind: {o["metadata"]["name"]: o["metadata"] for o in live if o["kind"] == kind}
        for kind in ("Deployment", "Service")
    }
    nothing = config().model_copy(update={"replicas": ()})
    return judge(render(nothing, stack=STACK), snapshot).doomed()


def test_each_object_is_deleted_by_its_uid_then_looked_for_once_more() -> None:
    live = applied(config())
    transport = Deleting(live=live)
    delete_all(Cluster(transport), config().kubernetes, everything(live))
    deletes = [(m, p, b) for m, p, b in transport.requests if m == "DELETE"]
    assert sorted(p for _, p, _ in deletes) == sorted(
        KINDS[o["kind"]].path(NS, o["metadata"]["name"]) for o in live
    )
    assert [m for m, _, _ in transport.requests[len(deletes) :]] == ["GET", "GET"]
    assert transport.live == {}


def test_an_object_replaced_since_its_check_is_left_and_named() -> None:
    live = applied(config())
    service = next(o for o in live if o["kind"] == "Service")
    path = f"/api/v1/namespaces/{NS}/services/{service['metadata']['name']}"
    conflict = Response(409, {"reason": "Conflict", "message": "Precondition failed: UID"})
    transport = Deleting({("DELETE", path): conflict}, live=live)
    with pytest.raises(OwnershipError) as refused:
        delete_all(Cluster(transport), config().kubernetes, everything(live))
    assert refused.value.problems == (
        f"Service/{NS}/{service['metadata']['name']}: replaced since its ownership was checked; "
        "InferCrane never deletes an object that is not exactly its own",
    )
