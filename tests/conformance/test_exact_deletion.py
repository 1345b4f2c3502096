"""Exact deletion on every path (issue 22): a person's ``pulumi up`` on the repository's
project, the run path the CLI calls, and ``NamespaceStack`` delete only this stack's objects,
each by the uid just checked; the engine only forgets. And a removed key whose object was
deleted out of band converges in one run on each driver."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from pulumi import automation as auto

from infercrane_pulumi.automation import engine
from infercrane_pulumi.errors import OwnershipError
from infercrane_pulumi.objects import kinds, naming
from infercrane_pulumi.objects.kinds import Kind
from tests.conformance.harness import Harness, intent, replica, wait_for
from tests.conformance.test_cli_and_faults import cli, finished
from tests.runguard import by_a_person

pytestmark = pytest.mark.conformance

LOOK_ALIKE = {"app.kubernetes.io/name": "another-team"}
KINDS = (kinds.DEPLOYMENT, kinds.SERVICE)


def look_alike(admin_client: client.ApiClient, kind: Kind, namespace: str, key: str) -> str:
    """Another team's object at ``key``'s name, without our marks; its uid."""
    meta = client.V1ObjectMeta(name=naming.object_name(key), labels=LOOK_ALIKE)
    created: Any
    if kind is kinds.SERVICE:
        service = client.V1Service(
            metadata=meta,
            spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)], selector=LOOK_ALIKE),
        )
        created = client.CoreV1Api(admin_client).create_namespaced_service(namespace, service)
    else:
        container = client.V1Container(name="app", image=f"registry.example/team@sha256:{'c' * 64}")
        template = client.V1PodTemplateSpec(
            metadata=client.V1ObjectMeta(labels=LOOK_ALIKE),
            spec=client.V1PodSpec(containers=[container]),
        )
        deployment = client.V1Deployment(
            metadata=meta,
            spec=client.V1DeploymentSpec(
                selector=client.V1LabelSelector(match_labels=LOOK_ALIKE), template=template
            ),
        )
        created = client.AppsV1Api(admin_client).create_namespaced_deployment(namespace, deployment)
    return str(created.metadata.uid)


def uid(harness: Harness, kind: Kind, key: str) -> str | None:
    live = harness.get(kind, key)
    return None if live is None else str(live["metadata"]["uid"])


def once_the_program_registers(act: Callable[[], object]) -> Callable[[auto.EngineEvent], None]:
    """An engine-event hook that calls ``act`` once, at the first step after the ownership
    check (the stack's provider is registered only after it): 'after the check'."""
    done = threading.Event()

    def hook(event: auto.EngineEvent) -> None:
        pre = event.resource_pre_event
        if pre is None or done.is_set() or pre.metadata.op == "refresh":
            return
        if pre.metadata.type.startswith("pulumi:providers:"):
            done.set()
            act()

    return hook


def by_hand(
    harness: Harness,
    tmp_path: Path,
    *command: str,
    on_event: Callable[[auto.EngineEvent], None],
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """A person's ``pulumi <command>`` (``up --yes`` unless given) on a copy of the repository's
    ``Pulumi.yaml`` (its virtualenv: this one) with the test's stack file; the engine's events
    go to ``on_event``. ``check``: the run must succeed."""
    project = harness.by_hand_project(tmp_path / "by-hand")
    events = tmp_path / "by-hand-events.jsonl"
    events.unlink(missing_ok=True)
    tail = engine.Tail(events, on_event, cli="(the suite's)")
    try:
        done = by_a_person(
            subprocess.run,
            [
                "pulumi",
                *(command or ("up", "--yes")),
                "--stack",
                harness.stack_name,
                "--event-log",
                str(events),
            ],
            cwd=project,
            env=harness.process_env() | harness.env.variables() | {"PULUMI_DEBUG_COMMANDS": "true"},
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
    finally:
        tail.close()
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.parametrize("driver", ["by hand", "run path", "NamespaceStack"])
def test_a_look_alike_placed_at_a_removed_keys_name_after_the_check_is_never_deleted(
    harness: Harness, admin_client: client.ApiClient, tmp_path: Path, driver: str
) -> None:
    """Another team's Service takes a removed key's name after the ownership check (while the
    engine runs): the engine only forgets it; a driver's own deletion, by the uid it checked,
    refuses it by name; a person's run had deleted ours before."""
    harness.configure([replica("keep-r0"), replica("drop-r0")])
    harness.up()
    kept = {kind.kind: uid(harness, kind, "keep-r0") for kind in (kinds.DEPLOYMENT, kinds.SERVICE)}
    placed: dict[str, str] = {}

    def place() -> None:
        ours = harness.get(kinds.SERVICE, "drop-r0")
        if ours is not None:  # a driver deletes once the engine has forgotten it
            assert harness.admin.delete(ours, uid=ours["metadata"]["uid"]).status < 300
        placed["uid"] = look_alike(admin_client, kinds.SERVICE, harness.namespace, "drop-r0")

    hook = once_the_program_registers(place)
    harness.configure([replica("keep-r0")])
    name = f"Service/{harness.namespace}/{naming.object_name('drop-r0')}"
    refused = (
        f"{name}: replaced since its ownership was checked; InferCrane never deletes an object "
        "that is not exactly its own",
    )
    if driver == "by hand":
        by_hand(harness, tmp_path, on_event=hook)
    elif driver == "run path":
        with pytest.raises(OwnershipError) as error:
            harness.up(on_event=hook)
        assert error.value.problems == refused
    else:
        stack = harness.namespace_stack(tmp_path / "workspace")
        stack.on_event = hook
        with pytest.raises(OwnershipError) as error:
            stack.ensure([intent("keep-r0")])
        assert error.value.problems == refused
    assert placed, "the engine never reached the step after the check"
    assert uid(harness, kinds.SERVICE, "drop-r0") == placed["uid"]  # untouched
    wait_for(
        lambda: uid(harness, kinds.DEPLOYMENT, "drop-r0") is None or None,
        timeout=30,
        what="the removed key's Deployment (ours) deleted",
    )
    assert {k.kind: uid(harness, k, "keep-r0") for k in (kinds.DEPLOYMENT, kinds.SERVICE)} == kept
    # The stack forgot the key; the look-alike is nobody's business of ours.
    again = harness.namespace_stack(tmp_path / "again").ensure([intent("keep-r0")])
    assert (again.verified_unchanged, uid(harness, kinds.SERVICE, "drop-r0")) == (
        True,
        placed["uid"],
    )


def test_a_person_emptying_the_stack_deletes_only_what_is_exactly_ours(
    harness: Harness, admin_client: client.ApiClient, tmp_path: Path
) -> None:
    """The issue's reproduction: another team's Deployment in place of the last key's, and a
    stack emptied of intents, run by hand (which knows nothing of the stack's record)."""
    harness.configure([replica("last-r0")])
    harness.up()
    assert (
        harness.admin.delete(
            {
                "kind": "Deployment",
                "metadata": {"name": naming.object_name("last-r0"), "namespace": harness.namespace},
            },
            uid=str(uid(harness, kinds.DEPLOYMENT, "last-r0")),
        ).status
        < 300
    )
    theirs = look_alike(admin_client, kinds.DEPLOYMENT, harness.namespace, "last-r0")
    harness.configure([], allow_empty=True)
    by_hand(harness, tmp_path, on_event=lambda event: None)
    assert uid(harness, kinds.DEPLOYMENT, "last-r0") == theirs
    assert uid(harness, kinds.SERVICE, "last-r0") is None


@pytest.mark.parametrize("driver", ["CLI", "NamespaceStack"])
def test_removing_a_key_whose_service_was_deleted_out_of_band_converges_in_one_run(
    harness: Harness, tmp_path: Path, driver: str
) -> None:
    keys = ["rm-a", "rm-b"]
    harness.configure([replica(k) for k in keys])
    harness.up()
    kept = {kind.kind: uid(harness, kind, "rm-a") for kind in (kinds.DEPLOYMENT, kinds.SERVICE)}
    service = harness.get(kinds.SERVICE, "rm-b")
    assert service is not None
    assert harness.admin.delete(service, uid=service["metadata"]["uid"]).status < 300
    if driver == "CLI":
        harness.configure([replica("rm-a")])
        code, envelope, err = finished(cli(harness, "up"))
        assert code == 0, err[-2000:]
        changes = {r["externalKey"]: r["change"] for r in envelope["result"]["replicas"]}
        again = harness.up()
    else:
        stack = harness.namespace_stack(tmp_path / "workspace")
        changes = {r.external_key: r.change for r in stack.ensure([intent("rm-a")]).replicas}
        again = stack.ensure([intent("rm-a")])
    assert changes == {"rm-a": "same", "rm-b": "delete"}
    assert {r.external_key: r.change for r in again.replicas} == {"rm-a": "same"}
    assert [
        o["metadata"]["name"] for k in (kinds.DEPLOYMENT, kinds.SERVICE) for o in harness.owned(k)
    ] == [naming.object_name("rm-a")] * 2
    assert {k.kind: uid(harness, k, "rm-a") for k in (kinds.DEPLOYMENT, kinds.SERVICE)} == kept


def test_a_persons_destroy_deletes_every_object_of_the_stack_or_refuses_changing_nothing(
    harness: Harness, admin_client: client.ApiClient, tmp_path: Path
) -> None:
    """Issue 49's third scenario: a person's ``pulumi destroy --yes`` exited 0 and forgot every
    replica, its Pods running. Every component carries the program's delete hook, so without
    the program the engine refuses in one line and changes nothing; with it
    (``--run-program``) each key's objects are deleted by uid, and no Pod of theirs is left."""
    keys = ["dh-a", "dh-b"]
    harness.configure([replica(key) for key in keys])
    harness.up()  # as the tutorial applies it (the run path the CLI's `up` takes)
    applied = {kind.kind: {key: uid(harness, kind, key) for key in keys} for kind in KINDS}
    assert all(found for of_kind in applied.values() for found in of_kind.values()), applied
    theirs = look_alike(admin_client, kinds.DEPLOYMENT, harness.namespace, "dh-other")

    refused = by_hand(harness, tmp_path, "destroy", "--yes", on_event=lambda e: None, check=False)
    assert refused.returncode != 0
    printed = refused.stdout + refused.stderr
    assert "--run-program" in printed, printed[-2000:]
    assert {kind.kind: {key: uid(harness, kind, key) for key in keys} for kind in KINDS} == applied
    recorded = harness.stack().export_stack().deployment or {}
    assert sum(r.get("type") == naming.REPLICA_TYPE for r in recorded["resources"]) == len(keys)

    by_hand(harness, tmp_path, "destroy", "--yes", "--run-program", on_event=lambda e: None)
    assert {kind.kind: {key: uid(harness, kind, key) for key in keys} for kind in KINDS} == {
        kind.kind: dict.fromkeys(keys) for kind in KINDS
    }
    assert uid(harness, kinds.DEPLOYMENT, "dh-other") == theirs  # never ours to delete

    def pods_of_ours() -> bool | None:
        pods = client.CoreV1Api(admin_client).list_namespaced_pod(
            harness.namespace, label_selector=naming.OWNED_SELECTOR
        )
        return True if not pods.items else None

    wait_for(pods_of_ours, timeout=120, what="the destroyed replicas' Pods to be gone")


def test_a_misspelt_replicas_key_changes_nothing_on_any_path(
    harness: Harness, tmp_path: Path
) -> None:
    """The stack file's replicas key misspelt once read as "no replicas", which deleted every
    replica on every path. Now a person's ``pulumi up`` and the command line's ``up`` (the
    runner's) refuse it, each saying why, and every object keeps its uid."""
    harness.configure([replica("typo-a"), replica("typo-b")])
    harness.up()

    def uids() -> dict[tuple[str, str], str | None]:
        return {(k.kind, key): uid(harness, k, key) for k in KINDS for key in ("typo-a", "typo-b")}

    before = uids()
    assert None not in before.values()
    document = yaml.safe_load(harness.stack_file.read_text())
    document["config"]["infercrane:replica"] = document["config"].pop("infercrane:replicas")
    harness.stack_file.write_text(yaml.safe_dump(document))
    said = "infercrane:replica: is not a known key; did you mean infercrane:replicas?"

    person = by_hand(harness, tmp_path, on_event=lambda _event: None, check=False)
    assert person.returncode != 0
    assert said in person.stdout + person.stderr

    code, envelope, _ = finished(cli(harness, "up"))
    assert (code, envelope["ok"], envelope["error"]["code"]) == (2, False, "invalid-config")
    assert said in envelope["error"]["problems"]
    assert uids() == before
