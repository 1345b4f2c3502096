"""Lifecycle through the real Pulumi engine on a real API server, as the provider identity.

Scenarios 1-4, 10 and 11 of the conformance issue: strict apply, no-op re-run, restart
observation, lost-state repair, deletion, secret hygiene. Every claim is read back from the API
server as admin; Pulumi's own view is never the evidence.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from pulumi import automation as auto

from infercrane_dev.localcluster.processes import descendants, is_alive
from infercrane_pulumi import automation
from infercrane_pulumi.automation.results import step_of
from infercrane_pulumi.cluster import preflight, verdict
from infercrane_pulumi.config.files import load_stack_file
from infercrane_pulumi.errors import RejectedError
from infercrane_pulumi.objects import kinds, naming, workloads
from tests.conformance.backends import Tenant
from tests.conformance.harness import (
    ENGINE_CLIS,
    Harness,
    fields_of,
    intent,
    managers,
    replica,
    show,
    unowned,
    wait_for,
)
from tests.conformance.test_cli_and_faults import cli_env
from tests.conformance.test_engine_contracts import held_by_a_person
from tests.runguard import by_a_person

pytestmark = pytest.mark.conformance


def foreign_configmap(admin_client: client.ApiClient, namespace: str) -> str:
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="someone-elses"), data={"owner": "another team"}
    )
    created = client.CoreV1Api(admin_client).create_namespaced_config_map(namespace, body)
    assert created.metadata is not None
    return str(created.metadata.resource_version)


def read_configmap_version(admin_client: client.ApiClient, namespace: str) -> str:
    live = client.CoreV1Api(admin_client).read_namespaced_config_map("someone-elses", namespace)
    assert live.metadata is not None
    return str(live.metadata.resource_version)


def test_strict_apply_preview_writes_nothing_up_applies_under_our_manager_only(
    harness: Harness, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness.configure([replica("strict-r0"), replica("strict-r1", runtimeArgs=["--tp", "1"])])
    before = harness.resource_versions()

    preview = harness.preview()
    assert [
        (r.external_key, r.change, [o.change for o in r.objects]) for r in preview.replicas
    ] == [
        ("strict-r0", "create", ["create", "create"]),
        ("strict-r1", "create", ["create", "create"]),
    ]
    assert harness.resource_versions() == before == {}

    # The window between the run's decision (its snapshot) and the engine's first write.
    marks: dict[str, float] = {}
    snapshot = preflight.snapshot

    def timed_snapshot(*args: Any, **kwargs: Any) -> preflight.Snapshot:
        found = snapshot(*args, **kwargs)
        marks["decided"] = time.monotonic()
        return found

    def first_write(event: auto.EngineEvent) -> None:
        step = step_of(event)
        if step is not None and event.resource_pre_event is not None and step.op == "create":
            marks.setdefault("written", time.monotonic())

    monkeypatch.setattr(preflight, "snapshot", timed_snapshot)
    result = harness.up(on_event=first_write)
    window = marks["written"] - marks["decided"]
    show(pytestconfig, f"decision (snapshot) to the engine's first write: {window:.2f}s")
    assert [r.change for r in result.replicas] == ["create", "create"]
    config = load_stack_file(harness.stack_file)
    for desired in workloads.stack_objects(config):
        live = harness.get(workloads.KINDS[desired["kind"]], desired["metadata"]["name"])
        assert live is not None
        assert ("infercrane-provider-v1", "Apply") in managers(live)
        assert not [m for m, _ in managers(live) if m.startswith("pulumi")]
        missing = unowned(desired, fields_of(live, "infercrane-provider-v1"))
        assert missing == [], missing


def test_preview_reaches_the_api_server_and_fails_on_admission_before_any_write(
    harness: Harness, admin_client: client.ApiClient
) -> None:
    quota = client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="no-deployments"),
        spec=client.V1ResourceQuotaSpec(hard={"count/deployments.apps": "0"}),
    )
    client.CoreV1Api(admin_client).create_namespaced_resource_quota(harness.namespace, quota)

    def quota_counted() -> object:
        read = client.CoreV1Api(admin_client).read_namespaced_resource_quota
        status = read("no-deployments", harness.namespace).status
        return status and status.hard

    wait_for(
        quota_counted,
        timeout=30,
        what="quota status",
    )
    harness.configure([replica("admission-r0")])
    with pytest.raises(RejectedError) as refused:
        harness.preview()
    assert "exceeded quota" in str(refused.value)
    assert harness.resource_versions() == {}


def test_a_second_up_with_the_same_intents_writes_nothing(
    harness: Harness, pytestconfig: pytest.Config
) -> None:
    harness.configure([replica("noop-r0")])
    harness.up()
    harness.settled("noop-r0")
    before = our_writes(harness)
    started = time.monotonic()
    result = harness.up()
    show(
        pytestconfig, f"no-op up (verified unchanged, no engine): {time.monotonic() - started:.1f}s"
    )
    assert [(r.change, [o.change for o in r.objects]) for r in result.replicas] == [
        ("same", ["same", "same"])
    ]
    assert result.verified_unchanged  # nothing changed anywhere: the engine did not start
    assert our_writes(harness) == before


def our_writes(harness: Harness) -> dict[str, tuple[str, int, list[dict[str, Any]]]]:
    """Per object: what only a write of ours moves (uid, generation, our managedFields entry
    with its time). Not the resourceVersion: the Deployment controller writes status when it
    likes (seen once moving it during a no-op)."""
    return {
        f"{kind.kind}/{item['metadata']['name']}": (
            item["metadata"]["uid"],
            item["metadata"].get("generation", 0),
            [
                entry
                for entry in item["metadata"].get("managedFields") or []
                if entry.get("manager") == naming.FIELD_MANAGER
            ],
        )
        for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
        for item in harness.owned(kind)
    }


def _inspect(harness: Harness) -> dict[str, Any]:
    """`infercrane inspect` in a new process, as the provider identity (it reads what the
    stack applied from the backend)."""
    completed = harness.cli(
        "inspect", "--config", str(harness.stack_file), "--json", env=cli_env(harness)
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout)
    return result


def test_restart_observation_from_a_fresh_process_and_workspace(
    harness: Harness, tmp_path: Path
) -> None:
    keys = ["observe-r0", "observe-r1"]
    harness.configure([replica(k) for k in keys])
    harness.up()

    fresh = dataclasses.replace(harness, workdir=tmp_path / "fresh", log=[])
    fresh.configure([replica(k) for k in keys])
    outputs = fresh.stack().outputs()
    assert sorted(outputs["replicas"].value) == keys

    inventory = _inspect(fresh)["result"]
    assert [(e["externalKey"], e["state"]) for e in inventory] == [
        ("observe-r0", "provisioning"),
        ("observe-r1", "provisioning"),
    ]


def test_service_deleted_out_of_band_is_reported_degraded_then_recreated(
    harness: Harness, admin_client: client.ApiClient
) -> None:
    harness.configure([replica("repair-r0")])
    harness.up()
    name = naming.object_name("repair-r0")
    client.CoreV1Api(admin_client).delete_namespaced_service(name, harness.namespace)
    wait_for(
        lambda: harness.get(kinds.SERVICE, name) is None or None, timeout=30, what="service gone"
    )
    assert _inspect(harness)["result"][0]["state"] == "degraded"

    harness.up()
    service = harness.get(kinds.SERVICE, name)
    assert service is not None
    assert verdict.is_exactly_ours(service["metadata"], harness.namespace, "repair-r0")
    assert _inspect(harness)["result"][0]["state"] == "provisioning"


def test_lost_pulumi_state_converges_by_taking_back_exactly_ours(
    harness: Harness, admin_client: client.ApiClient, tmp_path: Path
) -> None:
    harness.configure([replica("lost-r0"), replica("lost-r1")])
    harness.up()
    foreign_version = foreign_configmap(admin_client, harness.namespace)
    uids = {
        o["metadata"]["uid"]
        for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
        for o in harness.owned(kind)
    }

    empty_backend = automation.PulumiEnvironment(
        state_dir=tmp_path / "empty-state",
        pulumi_home=harness.env.pulumi_home,
        passphrase=harness.env.passphrase,
        bin_dir=harness.env.bin_dir,
        kubeconfig=harness.env.kubeconfig,
    )
    result = harness.up(empty_backend)
    assert [r.change for r in result.replicas] == ["create", "create"]  # for the new state
    after = {
        o["metadata"]["uid"]
        for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
        for o in harness.owned(kind)
    }
    assert after == uids and len(after) == 4  # same objects, no duplicate
    assert read_configmap_version(admin_client, harness.namespace) == foreign_version


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_an_up_killed_mid_run_is_recovered_by_the_next_run(harness: Harness) -> None:
    # Enough keys that the run is still writing when its first object shows.
    keys = [f"killed-r{i}" for i in range(12)]
    harness.configure([replica(k) for k in keys])
    harness.stack()  # create the stack before a person's raw CLI run
    # A private TMPDIR, as the drivers give every run: the provider copies the kubeconfig into
    # it, and the killed run cannot clean up.
    private = harness.workdir / "killed-run-tmp"
    private.mkdir(mode=0o700)
    env = harness.process_env() | harness.env.variables() | {"TMPDIR": str(private)}
    process = by_a_person(
        subprocess.Popen,
        [
            "pulumi",
            "up",
            "--yes",
            "--skip-preview",
            "--stack",
            harness.stack_name,
            "--non-interactive",
        ],
        cwd=harness.by_hand_project(harness.workdir / "by-hand"),
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    helpers: set[int] = set()  # plugins: language host, program, provider

    def first_object() -> bool:
        # Read before the objects: a process seen here ran while the run was writing.
        helpers.update(descendants(process.pid))
        return bool(harness.owned(kinds.DEPLOYMENT) or harness.owned(kinds.SERVICE))

    try:
        wait_for(first_object, timeout=120, what="the first object of the killed run")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    assert helpers
    # Killed mid-run, not after it: the run's lock is still there for the next run to break.
    assert automation.stack_locks(harness.env.state_dir, harness.stack_name) != []
    wait_for(
        lambda: not any(is_alive(pid) for pid in helpers),
        timeout=30,
        what="the killed run's plugins and program to exit",
    )

    harness.up()  # the next run recovers: stale lock, interrupted operations
    for kind in (kinds.DEPLOYMENT, kinds.SERVICE):
        names = sorted(o["metadata"]["name"] for o in harness.owned(kind))
        assert names == sorted(naming.object_name(k) for k in keys)
    assert automation.stack_locks(harness.env.state_dir, harness.stack_name) == []


def test_a_checkpoint_torn_by_a_kill_during_the_state_write_is_recovered_by_the_next_run(
    harness: Harness, tmp_path: Path
) -> None:
    """Found by the deletion rule's property test: a run SIGKILLed while the engine wrote the
    state left the file backend's checkpoint attributes empty beside the previous checkpoint,
    and every later CLI failed to load it (EOF), so the stack never converged. Its lock stays
    (the CLI removes it after the write): the next run's recovery removes the torn attributes
    under its own lock and goes on."""
    harness.configure([replica("torn-a")])
    harness.up()
    torn_by_a_kill(harness, tmp_path)

    harness.configure([replica("torn-a"), replica("torn-b")])
    result = harness.up()
    assert [(r.external_key, r.change) for r in result.replicas] == [
        ("torn-a", "same"),
        ("torn-b", "create"),
    ]
    assert automation.stack_locks(harness.env.state_dir, harness.stack_name) == []


def test_a_checkpoint_torn_under_an_open_namespace_stack_is_recovered_by_its_next_remove(
    harness: Harness, tmp_path: Path
) -> None:
    """A control plane keeps its ``NamespaceStack`` (the stack opened once) while a run of it
    is killed during the state write: the next call on the same object recovers before it
    reads the state, as a fresh one would, instead of failing on the torn checkpoint."""
    harness.configure([replica("torn-a"), replica("torn-b")])  # the killed person's stack file
    stack = harness.namespace_stack(tmp_path / "workspace")
    stack.ensure([intent("torn-a"), intent("torn-b")])
    torn_by_a_kill(harness, tmp_path)

    result = stack.remove("torn-a")
    assert {r.external_key: r.change for r in result.replicas} == {
        "torn-a": "delete",
        "torn-b": "same",
    }
    assert harness.get(kinds.DEPLOYMENT, "torn-a") is None
    assert harness.get(kinds.DEPLOYMENT, "torn-b") is not None
    assert harness.env.state_dir is not None
    assert automation.stack_locks(harness.env.state_dir, harness.stack_name) == []


def torn_by_a_kill(harness: Harness, directory: Path) -> None:
    """The stack as a run SIGKILLed during the state write leaves it on the file backend: its
    lock held by a dead process (the CLI removes it after the write) and the checkpoint's
    attributes empty, which the CLI then fails to load."""
    assert harness.env.state_dir is not None
    with held_by_a_person(harness, directory / "killed"):
        pass  # SIGKILLed holding the stack's lock, as a run killed mid-write is
    checkpoint = harness.env.state_dir / ".pulumi" / "stacks" / "infercrane"
    (checkpoint / f"{harness.stack_name}.json.attrs").write_bytes(b"")  # as the kill left it
    unreadable = by_a_person(
        subprocess.run,
        ["pulumi", "stack", "export", "--stack", harness.stack_name],
        cwd=harness.by_hand_project(directory / "reader"),
        env=harness.process_env() | harness.env.variables(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert "failed to load checkpoint: EOF" in unreadable.stderr, unreadable.stderr


def test_removing_an_intent_and_destroy_delete_exactly_ours(
    harness: Harness, admin_client: client.ApiClient, pytestconfig: pytest.Config
) -> None:
    harness.configure([replica("keep-r0"), replica("drop-r0")])
    harness.up()
    foreign_version = foreign_configmap(admin_client, harness.namespace)
    kept = harness.get(kinds.DEPLOYMENT, "keep-r0")
    assert kept is not None

    harness.configure([replica("keep-r0")])
    harness.up()
    assert harness.get(kinds.DEPLOYMENT, "drop-r0") is None
    assert harness.get(kinds.SERVICE, "drop-r0") is None
    still = harness.get(kinds.DEPLOYMENT, "keep-r0")
    assert still is not None and still["metadata"]["uid"] == kept["metadata"]["uid"]

    started = time.monotonic()
    harness.destroy()
    harness.destroy()  # idempotent
    elapsed = time.monotonic() - started
    wait_for(
        lambda: not (harness.owned(kinds.DEPLOYMENT) or harness.owned(kinds.SERVICE)),
        timeout=30,
        what="zero owned objects",
    )
    assert read_configmap_version(admin_client, harness.namespace) == foreign_version
    show(pytestconfig, f"two destroys took {elapsed:.1f}s; zero owned objects within 30s")


def test_the_worker_secret_value_appears_nowhere(harness: Harness, tenant: Tenant) -> None:
    harness.configure([replica("hygiene-r0")])
    harness.up()
    stack: auto.Stack = harness.stack()
    exported = json.dumps(stack.export_stack().deployment)
    outputs = json.dumps({k: v.value for k, v in stack.outputs().items()})
    value = tenant.bootstrapped.worker_secret_value
    assert value not in exported
    assert value not in outputs
    assert value not in harness.text()
    for path in harness.stored_files():
        assert value.encode() not in path.read_bytes(), path
