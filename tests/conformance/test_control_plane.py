"""The control plane's interface on the real engine: intents held in code, per-key results,
observation, a busy stack that says "retry", and several namespaces at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation import engine, ensure_many, project, results
from infercrane_pulumi.errors import ConfigError, RejectedError
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.harness import ENGINE_CLIS, Harness, intent, wait_for
from tests.conformance.ledger import RunLedger

pytestmark = pytest.mark.conformance


@pytest.mark.pythons
@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_ensure_observe_change_remove_and_destroy_per_key(harness: Harness, tmp_path: Path) -> None:
    stack = harness.namespace_stack(tmp_path / "workspace")
    a, b = intent("cp-a"), intent("cp-b", modelRevision="r1")
    # The control plane's doctor ends with the Pulumi its runs use: CLI and plugin in range.
    assert [(row.status, row.name) for row in stack.doctor()[-2:]] == [
        ("ok", "pulumi:cli"),
        ("ok", "pulumi:plugin"),
    ]

    created = stack.ensure([a, b])
    assert [(r.external_key, r.change) for r in created.replicas] == [
        ("cp-a", "create"),
        ("cp-b", "create"),
    ]
    for replica in created.replicas:
        live = {
            (kind.kind, obj["metadata"]["name"]): obj["metadata"]["uid"]
            for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
            for obj in harness.owned(kind)
            if obj["metadata"]["name"] == naming.object_name(replica.external_key)
        }
        assert {(o.kind, o.name): o.uid for o in replica.objects} == live
        assert replica.endpoint == (
            f"http://{naming.object_name(replica.external_key)}.{harness.namespace}.svc:8000"
        )

    # No node of the product and no Pod permission: the Deployment's own condition says why.
    def provisioning_with_reason() -> list[Any] | None:
        found = stack.observe()
        reasons = [o.reason for o in found]
        return found if all("MinimumReplicasUnavailable" in r for r in reasons) else None

    observed = wait_for(provisioning_with_reason, timeout=60, what="a provisioning reason")
    assert [(o.external_key, o.state) for o in observed] == [
        ("cp-a", "provisioning"),
        ("cp-b", "provisioning"),
    ]

    # What our field manager wrote, not resourceVersion: the Deployment controller may still
    # write its status.
    before = harness.written()
    again = stack.ensure([a, b])
    assert [r.change for r in again.replicas] == ["same", "same"]
    assert harness.written() == before

    def state_names() -> list[str]:
        """Every component and object the engine's state holds, by resource name."""
        deployment = stack.stack().export_stack().deployment or {}
        urns = [r["urn"] for r in deployment["resources"] if naming.REPLICA_TYPE in r["urn"]]
        return sorted(urn.rpartition("::")[2] for urn in urns)

    def names_of(*keys: str) -> list[str]:
        children = [naming.child_name(key, k) for key in keys for k in ("Deployment", "Service")]
        return sorted([*map(naming.object_name, keys), *children])

    held = state_names()
    assert held == names_of("cp-a", "cp-b")
    assert_read_as_the_cli_prints(stack.stack())
    recorded = stack.stack().outputs()["replicas"].value["cp-a"]
    # cp-a is verified unchanged: the run targets cp-b only and its program registers cp-b
    # only; the engine keeps cp-a's resources as they were (a run that forgot them would
    # orphan them) and reports them unchanged, and the outputs still record cp-a as before.
    # Its `same` steps are not read: its result comes from what the stack applied, and the
    # events handed on are those of the work done.
    seen: list[auto.EngineEvent] = []
    stack.on_event = seen.append
    changed = stack.ensure([a, intent("cp-b", modelRevision="r2")])
    stack.on_event = None
    assert {step.external_key for step in results.steps_of(seen)} == {"cp-b"}
    # The engine still stepped cp-a's component and objects: the stack and cp-b's Deployment
    # are updated, the provider, cp-b's component and Service and cp-a's three are the same.
    [summary] = [e.summary_event for e in seen if e.summary_event is not None]
    assert summary.resource_changes == {"same": 6, "update": 2}
    assert [(r.external_key, r.change) for r in changed.replicas] == [
        ("cp-a", "same"),
        ("cp-b", "update"),
    ]
    kept, made = changed.replicas[0].objects, created.replicas[0].objects
    assert sorted((o.kind, o.name, o.uid, o.change) for o in kept) == sorted(
        (o.kind, o.name, o.uid, "same") for o in made
    )
    assert state_names() == held
    assert stack.stack().outputs()["replicas"].value["cp-a"] == recorded

    removed = stack.remove("cp-a")
    assert [(r.external_key, r.change) for r in removed.replicas] == [
        ("cp-b", "same"),
        ("cp-a", "delete"),
    ]
    assert state_names() == names_of("cp-b")
    [gone] = stack.observe("cp-a")
    assert (gone.state, gone.objects) == ("absent", ())
    assert stack.remove("cp-a").replica("cp-a") is None  # removing again is no error

    destroyed = stack.destroy()
    assert [(r.external_key, r.change) for r in destroyed.replicas] == [("cp-b", "delete")]
    assert harness.owned(kinds.DEPLOYMENT) == harness.owned(kinds.SERVICE) == []
    assert_read_as_the_cli_prints(stack.stack(), destroyed=True)


def assert_read_as_the_cli_prints(stack: auto.Stack, *, destroyed: bool = False) -> None:
    """The driver reads a local directory's checkpoint file itself (``checkpoints``): what it
    reads is what ``pulumi stack output`` prints of the state the engine wrote. A destroyed
    stack's checkpoint lists no resources at all, which the reader does not take for "no
    outputs" (unknown is never empty): it leaves that to the CLI."""
    backend = stack.workspace.env_vars["PULUMI_BACKEND_URL"]
    read = engine.checkpoint_outputs(backend, project.PROJECT_NAME, stack.name)
    printed = {name: output.value for name, output in stack.outputs().items()}
    assert (read, printed) == ((None, {}) if destroyed else (printed, printed))


def test_bad_intents_are_refused_before_anything_is_written(
    harness: Harness, tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "workspace")
    for intents, problem in (
        ([intent("dup"), intent("dup")], "externalKey 'dup' appears 2 times"),
        ([intent("Case-Key"), intent("case-key")], "differ only in case or whitespace"),
    ):
        with pytest.raises(ConfigError) as refused:
            stack.ensure(intents)
        assert any(problem in p for p in refused.value.problems)
    assert not (tmp_path / "workspace").exists()  # not even the workspace was written
    assert harness.resource_versions() == {}


def test_several_namespaces_at_once_and_one_failure_stops_no_other(
    harness: Harness, ledger: RunLedger, tmp_path: Path
) -> None:
    requests = {}
    for index in range(4):
        # One control plane serving several namespaces: the shipped Roles bound, in each, to
        # the one identity it runs as (here the test namespace's ServiceAccount).
        namespace = ledger.bootstrap(
            f"{harness.namespace}-p{index}", bind_to=[harness.provider.subject]
        ).namespace
        requests[namespace] = (
            harness.namespace_stack(
                tmp_path / namespace,
                namespace=namespace,
                stack_name=f"{harness.stack_name}-p{index}",
            ),
            [intent(f"par-{index}-a"), intent(f"par-{index}-b")],
        )
    # A namespace nobody bootstrapped: the provider identity holds no Role there.
    stranger = harness.namespace_stack(
        tmp_path / "d", namespace="default", stack_name=f"{harness.stack_name}-d"
    )
    requests["default"] = (stranger, [intent("x")])

    outcomes = ensure_many(requests, parallel=4)

    refused = outcomes.pop("default")
    assert isinstance(refused.error, RejectedError) and refused.result is None
    # Refused by RBAC, naming the provider identity and the resource it may not touch there.
    message = str(refused.error)
    assert "forbidden" in message and 'resource "deployments"' in message
    assert f'User "{harness.provider.username}"' in message
    for namespace, outcome in outcomes.items():
        assert outcome.error is None and outcome.result is not None
        assert [r.change for r in outcome.result.replicas] == ["create", "create"]
        names = {
            obj["metadata"]["name"]
            for obj in harness.admin.select(kinds.DEPLOYMENT, namespace, naming.OWNED_SELECTOR)
        }
        assert names == {naming.object_name(i.external_key) for i in requests[namespace][1]}
    for namespace in outcomes:
        ledger.delete_namespace(namespace)
