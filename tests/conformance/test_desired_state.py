"""Issue 59: a run given the stack's ConfigMap (the runner's ``up --configmap``) applies the stack
file as the API server holds it, read once the stack is held, whatever its own copy (the
kubelet's, which lags) says, and records which version it applied; without the shipped Role's
one ``get`` it is refused and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import yaml
from kubernetes import client

from infercrane_pulumi.automation import stacks
from infercrane_pulumi.objects import kinds
from infercrane_pulumi.program.records import DesiredVersion
from tests.conformance.harness import Harness, replica
from tests.conformance.runnerpod import applied_status, shipped, status_object
from tests.conformance.test_cli_and_faults import cli, cli_env, finished

pytestmark = pytest.mark.conformance

CONFIGMAP = "infercrane-stack"


def grant_the_runners_read(api: client.ApiClient, namespace: str, stack: str) -> None:
    """The shipped runner's Role and binding, and its status object of ``stack``, in the
    test's namespace (as the how-to applies them: the namespace replaced)."""
    made: Any = status_object(namespace, stack)
    client.CoreV1Api(api).create_namespaced_config_map(namespace, made)
    rbac = client.RbacAuthorizationV1Api(api)
    role: Any = shipped("Role")
    role["metadata"]["namespace"] = namespace
    rbac.create_namespaced_role(namespace, role)
    binding: Any = shipped("RoleBinding")
    binding["metadata"]["namespace"] = namespace
    binding["subjects"][0]["namespace"] = namespace
    rbac.create_namespaced_role_binding(namespace, binding)


def stack_text(harness: Harness, keys: list[str]) -> str:
    document = yaml.safe_load(harness.stack_file.read_text())
    document["config"]["infercrane:replicas"] = [replica(key) for key in keys]
    return yaml.safe_dump(document)


def test_a_run_applies_the_api_servers_stack_file_not_its_own_lagging_copy(
    harness: Harness, admin_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(admin_client)
    harness.configure([replica("cm-a"), replica("cm-b")])  # the kubelet's copy, never updated
    key = harness.stack_file.name
    core.create_namespaced_config_map(
        harness.namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=CONFIGMAP, namespace=harness.namespace),
            data={key: stack_text(harness, ["cm-a", "cm-b", "cm-c"])},
        ),
    )

    def up() -> tuple[int, dict[str, Any]]:
        code, envelope, _ = finished(cli(harness, "up", "--configmap", CONFIGMAP))
        return code, envelope

    def changed() -> tuple[int, dict[str, str]]:
        code, envelope = up()
        assert "result" in envelope, envelope
        return code, {r["externalKey"]: r["change"] for r in envelope["result"]["replicas"]}

    code, envelope = up()
    assert (code, envelope["error"]["code"]) == (1, "cluster-forbidden")
    assert harness.owned(kinds.DEPLOYMENT) == []

    grant_the_runners_read(admin_client, harness.namespace, harness.stack_name)
    assert changed() == (0, {"cm-a": "create", "cm-b": "create", "cm-c": "create"})
    live = harness.admin.get(kinds.CONFIG_MAP, harness.namespace, CONFIGMAP)
    assert live is not None
    source = f"ConfigMap/{harness.namespace}/{CONFIGMAP}"
    recorded = stacks.applied(harness.stack()).desired
    meta = live["metadata"]
    assert recorded == DesiredVersion(source, meta["uid"], meta["resourceVersion"])

    def uids() -> dict[str, str]:
        return {
            o["metadata"]["annotations"]["infercrane.dev/external-key"]: o["metadata"]["uid"]
            for o in harness.owned(kinds.DEPLOYMENT)
        }

    before = uids()
    # The ConfigMap loses cm-a; the copy still names it, and still lacks cm-c.
    core.patch_namespaced_config_map(
        CONFIGMAP, harness.namespace, {"data": {key: stack_text(harness, ["cm-b", "cm-c"])}}
    )
    assert changed() == (0, {"cm-a": "delete", "cm-b": "same", "cm-c": "same"})
    assert uids() == {k: v for k, v in before.items() if k != "cm-a"}
    assert changed() == (0, {"cm-b": "same", "cm-c": "same"})  # the lagging copy: nothing
    assert uids() == {k: v for k, v in before.items() if k != "cm-a"}


RACERS = 3  # runs at once


def test_runners_creating_one_stack_at_once_on_a_file_backend_all_answer_ok(
    harness: Harness,
) -> None:
    """Runs that create one new stack at the same moment once failed, one as busy, another as a
    failed run (a lock blob missing): the property test of versions found it in CI. A
    directory's stacks are now opened one process at a time."""
    harness.configure([replica("pair-a")])
    for attempt in range(2):
        name = f"{harness.stack_name}{attempt}"
        (harness.stack_file.parent / f"Pulumi.{name}.yaml").write_text(
            harness.stack_file.read_text()
        )
        up = ("up", "--stack", name, "--project-dir", str(harness.project_dir), "--wait", "120")
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "infercrane_pulumi", *up, "--json"],
                env=cli_env(harness),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(RACERS)
        ]
        answers = [json.loads(run.communicate(timeout=300)[0]) for run in runs]
        assert [answer["ok"] for answer in answers] == [True] * RACERS, answers
        destroy = ("destroy", "--stack", name, "--project-dir", str(harness.project_dir))
        done = subprocess.run(
            [sys.executable, "-m", "infercrane_pulumi", *destroy, "--json"],
            env=cli_env(harness),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert json.loads(done.stdout)["ok"], done.stdout


STATUS = "infercrane-stack-status"


def test_each_runs_result_is_in_the_status_object_and_a_lookalike_is_left_alone(
    harness: Harness, admin_client: client.ApiClient
) -> None:
    """Issue 61: ``up --status-configmap``, as the provider identity under the shipped Role
    (``get`` and ``patch`` on that one name: a server-side apply creates it), writes each run's
    result where ``kubectl get`` finds it; a typo in the stack ConfigMap is its error, what is
    applied kept; an object of someone else's at that name is never changed, and the run's
    outcome is the run's."""
    core = client.CoreV1Api(admin_client)
    harness.configure([replica("st-a")])
    key = harness.stack_file.name
    core.create_namespaced_config_map(
        harness.namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=CONFIGMAP, namespace=harness.namespace),
            data={key: stack_text(harness, ["st-a"])},
        ),
    )
    grant_the_runners_read(admin_client, harness.namespace, harness.stack_name)

    def up() -> tuple[int, dict[str, Any], str]:
        return finished(cli(harness, "up", "--configmap", CONFIGMAP, "--status-configmap", STATUS))

    def status() -> dict[str, Any]:
        found = harness.admin.get(kinds.CONFIG_MAP, harness.namespace, STATUS)
        assert found is not None
        return found

    def version() -> str:
        live = harness.admin.get(kinds.CONFIG_MAP, harness.namespace, CONFIGMAP)
        assert live is not None
        return str(live["metadata"]["resourceVersion"])

    code, envelope, stderr = up()
    assert "status not written" not in stderr, stderr
    applied = status()
    data = applied["data"]
    assert code == 0 and envelope["result"]["desiredVersion"]["resourceVersion"] == version()
    assert [(r["externalKey"], r["change"]) for r in envelope["result"]["replicas"]] == [
        ("st-a", "create")
    ]
    assert data == applied_status(envelope, at=data["finishedAt"])
    managers = {(m["manager"], m["operation"]) for m in applied["metadata"]["managedFields"]}
    # The admin made it (as the runner's base does); the runner's writes are applies.
    assert managers == {("infercrane-provider-v1", "Apply"), ("OpenAPI-Generator", "Update")}

    typo = stack_text(harness, ["st-a"]).replace("infercrane:replicas:", "infercrane:replica:")
    core.patch_namespaced_config_map(CONFIGMAP, harness.namespace, {"data": {key: typo}})
    code, envelope, _ = up()
    problems = envelope["error"]["problems"]
    assert (code, envelope["error"]["code"]) == (2, "invalid-config")
    assert status()["data"] | {"finishedAt": ""} == data | {
        "result": "failed",
        "error": "invalid-config",
        "retryable": "false",
        "problems": "\n".join(problems),
        "finishedAt": "",
    }

    # Someone else's ConfigMap at the status's name: never changed, and the run still applies.
    core.delete_namespaced_config_map(STATUS, harness.namespace)
    theirs = {"mine": "yes"}
    core.create_namespaced_config_map(
        harness.namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=STATUS, namespace=harness.namespace), data=theirs
        ),
    )
    core.patch_namespaced_config_map(
        CONFIGMAP, harness.namespace, {"data": {key: stack_text(harness, ["st-a"])}}
    )
    code, envelope, stderr = up()
    assert (code, envelope["ok"]) == (0, True)
    assert stderr.splitlines()[-1] == (
        f"up: status not written: ownership-conflict: ConfigMap/{harness.namespace}/{STATUS}: "
        f"exists and is not the run status of stack {harness.stack_name}; left unchanged"
    )
    left = status()
    assert left["data"] == theirs
    assert "infercrane-provider-v1" not in {m["manager"] for m in left["metadata"]["managedFields"]}
