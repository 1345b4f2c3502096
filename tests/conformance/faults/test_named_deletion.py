"""A run deletes only what its caller named (issue 49, as the control plane hit it): two
control-plane replicas on one PostgreSQL backend; replica A's ``ensure`` of twelve intents on a
new stack is SIGKILLed once its objects exist (no state records them); replica B's ``remove``
of one of the keys it made deletes that key's objects and no other key's, and says which it
left. B's next ``ensure`` of the twelve keeps every object the killed run made (the same uids)
and is then a verified no-op."""

from __future__ import annotations

import pytest

from tests.conformance.faults import checker
from tests.conformance.faults.conftest import Site
from tests.conformance.faults.driver import Driver, Point, kill_at, step_starts
from tests.conformance.faults.test_fault_matrix import LEASE_WAIT, replica_b, shared_backend

pytestmark = pytest.mark.conformance

KEYS = [f"r{i}" for i in range(12)]


def test_a_remove_after_a_killed_run_deletes_only_the_key_it_names(
    site: Site, request: pytest.FixtureRequest
) -> None:
    backend = shared_backend("postgres", request, site.directory)
    wanted = [checker.intent(key) for key in KEYS]
    with replica_b(site, backend) as starting:
        driver = Driver(site.directory / "killed", backend, site.settings)
        try:
            call = {"op": "apply", "namespace": site.namespace, "intents": wanted}
            # Held once the last key's first object is applied: the others' are there too.
            point = Point("created-not-recorded", step_starts("create"), "after-apply")
            kill = kill_at(driver, point, call, admin=site.admin, namespace=site.namespace)
        finally:
            driver.close()
        assert kill.landed, f"the run ended before its point; events: {kill.seen}"
        made = checker.listed(site.admin, site.namespace)
        made_keys = sorted({str(checker.key_of(meta)) for meta in made.values()})
        assert len(made_keys) > 1, f"the killed run made {made_keys}"
        # One key whose objects the killed run made (which ones it reached before the kill
        # varies: the program registers the keys at once).
        removed = made_keys[0]
        others = checker.uids(made, set(KEYS) - {removed})

        replica = starting.result()
        answer = replica.call("remove", namespace=site.namespace, key=removed, wait=LEASE_WAIT)
        assert answer == {
            "call": "remove",
            "ok": True,
            # The stack records nothing and keeps nothing: r0's objects go by uid, no engine.
            "verified": True,
            "changes": {removed: "delete"},
            "left": [key for key in made_keys if key != removed],
            "seconds": answer.get("seconds"),
        }
        after = checker.listed(site.admin, site.namespace)
        assert checker.uids(after, KEYS) == others  # every other key's object, untouched

        ensured = replica.call("apply", namespace=site.namespace, intents=wanted)
        assert ensured["ok"], ensured
        settled = checker.listed(site.admin, site.namespace)
        assert {checker.key_of(meta) for meta in settled.values()} == set(KEYS)
        kept = checker.uids(settled, KEYS)
        assert {obj: kept[obj] for obj in others} == others  # adopted as ours, never remade
        following = replica.call("apply", namespace=site.namespace, intents=wanted)
        assert following["verified"], following
