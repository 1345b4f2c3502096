"""The runner's status object: what a run writes where ``kubectl get`` finds it, from the very
envelope it prints; a failed run keeps what is applied; a look-alike is never changed."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from infercrane_pulumi import errors
from infercrane_pulumi.cli import commands, entry, views
from infercrane_pulumi.cluster import runstatus
from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.config import files
from infercrane_pulumi.objects.kinds import CONFIG_MAP
from infercrane_pulumi.program.records import DesiredVersion
from infercrane_pulumi.review.changes import KeyChange, StackChanges
from tests.unit.fake_cluster import FakeTransport
from tests.unit.test_cli import run
from tests.unit.test_shipped_manifests import DEPLOY as DEPLOY_DIR

NS = "tenant-a"
STATUS = "infercrane-stack-status"
PATH = CONFIG_MAP.path(NS, STATUS)
FINISHED = "2026-12-07T01:30:00Z"
APPLIED = StackChanges(
    operation="up",
    project="infercrane",
    stack=NS,
    namespace=NS,
    replicas=(
        KeyChange("chat", "same", ()),
        KeyChange("embed", "create", (), reasons=("Deployment/embed: absent",)),
        KeyChange("old", "delete", ()),
    ),
    desired=DesiredVersion(f"ConfigMap/{NS}/infercrane-stack", "u-1", "4711"),
)
APPLIED_DATA = {
    "result": "applied",
    "appliedVersion": "4711",
    "appliedAt": FINISHED,
    "replicas": json.dumps(
        [
            {"change": "same", "externalKey": "chat", "reasons": []},
            {"change": "create", "externalKey": "embed", "reasons": ["Deployment/embed: absent"]},
            {"change": "delete", "externalKey": "old", "reasons": []},
        ],
        sort_keys=True,
    ),
    "error": "",
    "retryable": "",
    "problems": "",
    "finishedAt": FINISHED,
}


def applied_envelope() -> dict[str, Any]:
    return views.envelope(views.Result("up", True, data=views.stack_changes(APPLIED)))


def refused_envelope() -> dict[str, Any]:
    refused = errors.ConfigError(["infercrane:replica: is not a known key", "second problem"])
    return views.error_envelope(refused, command="up")


def test_an_applied_run_says_which_version_it_applied_and_what_each_key_did() -> None:
    data = runstatus.status_data(applied_envelope(), finished_at=FINISHED, previous={})
    assert data == APPLIED_DATA


def test_a_failed_run_says_why_and_keeps_what_is_applied() -> None:
    later = "2026-12-07T01:31:00Z"
    data = runstatus.status_data(refused_envelope(), finished_at=later, previous=APPLIED_DATA)
    assert data == {
        "result": "failed",
        "appliedVersion": "4711",
        "appliedAt": FINISHED,
        "replicas": APPLIED_DATA["replicas"],
        "error": "invalid-config",
        "retryable": "false",
        "problems": "infercrane:replica: is not a known key\nsecond problem",
        "finishedAt": later,
    }


def expected_object(data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": STATUS,
            "namespace": NS,
            "labels": {
                "app.kubernetes.io/name": "infercrane-stack-status",
                "app.kubernetes.io/managed-by": "infercrane",
            },
            "annotations": {"infercrane.dev/stack": NS},
        },
        "data": data,
    }


class Recording(FakeTransport):
    """Keeps each PATCH body, and holds the status object as the API server would."""

    def __init__(self, existing: dict[str, Any] | None = None, patch: int = 200) -> None:
        answers = {} if existing is None else {("GET", PATH): Response(200, existing)}
        if patch != 200:
            answers[("PATCH", PATH)] = Response(patch, {"message": "conflict"})
        super().__init__(answers)
        self.bodies: list[Any] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Response:
        if method == "PATCH":
            self.bodies.append(kwargs.get("body"))
        return super().request(method, path, **kwargs)


def publish(transport: Recording, envelope: dict[str, Any]) -> None:
    runstatus.publish(
        Cluster(transport), NS, STATUS, stack=NS, envelope=envelope, finished_at=FINISHED
    )


def test_the_status_is_applied_server_side_under_the_provider_manager_never_forced() -> None:
    transport = Recording()
    publish(transport, applied_envelope())
    assert transport.requests == [
        ("GET", PATH, {}),
        ("PATCH", PATH, {"fieldManager": "infercrane-provider-v1", "force": "false"}),
    ]
    assert transport.bodies == [expected_object(APPLIED_DATA)]


def test_a_failed_run_reads_what_the_status_held_and_keeps_it() -> None:
    transport = Recording(existing=expected_object(APPLIED_DATA))
    publish(transport, refused_envelope())
    [body] = transport.bodies
    assert {k: body["data"][k] for k in runstatus.APPLIED_KEYS} == {
        k: APPLIED_DATA[k] for k in runstatus.APPLIED_KEYS
    }
    assert body["data"]["error"] == "invalid-config"


@pytest.mark.parametrize(
    "lookalike",
    [
        {"metadata": {"name": STATUS, "namespace": NS}, "data": {"mine": "yes"}},
        expected_object({}) | {"metadata": expected_object({})["metadata"] | {"annotations": {}}},
        expected_object({})
        | {
            "metadata": expected_object({})["metadata"]
            | {"annotations": {"infercrane.dev/stack": "other"}}
        },
    ],
    ids=["unlabelled", "no-stack", "another-stack"],
)
def test_a_lookalike_at_the_status_name_is_never_changed(lookalike: dict[str, Any]) -> None:
    transport = Recording(existing=lookalike)
    with pytest.raises(errors.OwnershipError) as refused:
        publish(transport, applied_envelope())
    assert refused.value.problems == (
        f"ConfigMap/{NS}/{STATUS}: exists and is not the run status of stack {NS}; left unchanged",
    )
    assert transport.bodies == []


def test_a_field_another_manager_owns_fails_the_write_never_forced() -> None:
    transport = Recording(patch=409)
    with pytest.raises(errors.OwnershipError) as refused:
        publish(transport, applied_envelope())
    assert refused.value.problems == (
        f"ConfigMap/{NS}/{STATUS}: another field manager owns its fields; left unchanged",
    )


def test_an_absent_status_the_identity_may_not_create_says_where_it_comes_from() -> None:
    with pytest.raises(errors.ClusterForbiddenError) as refused:
        publish(Recording(patch=403), applied_envelope())
    assert refused.value.problems == (
        f"ConfigMap/{NS}/{STATUS}: not found, and this identity may only patch it: apply the "
        "runner's Kustomize base (deploy/kubernetes/runner), which holds it",
    )


def test_the_shipped_status_object_is_the_status_of_its_namespaces_stack() -> None:
    [shipped] = [
        doc
        for doc in yaml.safe_load_all((DEPLOY_DIR / "runner" / "runner.yaml").read_text())
        if doc and doc["metadata"]["name"] == STATUS
    ]
    assert runstatus.is_status_of(shipped, shipped["metadata"]["namespace"])


def stack_file(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "stacks" / f"Pulumi.{NS}.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({"config": config}))
    return path


KUBERNETES = {
    "context": "ctx",
    "namespace": NS,
    "imageDigest": "registry.example/vllm@sha256:" + "a" * 64,
}
ENVIRON = {
    "PULUMI_BACKEND_URL": "file:///nowhere",
    "PULUMI_CONFIG_PASSPHRASE": "p",
    "KUBECONFIG": "/kubeconfig",
}


def test_up_writes_each_run_to_the_status_a_refused_file_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo refused before any run: the envelope says so, and so does the status object
    (the file's settings still say where it is)."""
    path = stack_file(tmp_path, {"infercrane:kubernetes": KUBERNETES, "infercrane:replica": []})
    transport = Recording(existing=expected_object(APPLIED_DATA))
    flags = ["--stack", NS, "--project-dir", str(tmp_path), "--status-configmap", STATUS, "--json"]
    code, out, err = run(["up", *flags], connect=lambda _: Cluster(transport), environ=ENVIRON)
    assert (code, err) == (errors.EXIT_CODES["invalid-config"], "")
    problems = json.loads(out)["error"]["problems"]
    [body] = transport.bodies
    assert body["data"]["problems"].splitlines() == problems
    assert (body["data"]["result"], body["data"]["appliedVersion"]) == ("failed", "4711")

    monkeypatch.setattr("infercrane_pulumi.cli.commands.run_stack_file", lambda *_, **__: APPLIED)
    path.write_text(yaml.safe_dump({"config": {"infercrane:kubernetes": KUBERNETES}}))
    code, out, err = run(["up", *flags], connect=lambda _: Cluster(transport), environ=ENVIRON)
    assert (code, err) == (0, "")
    assert transport.bodies[-1]["data"]["result"] == "applied"
    assert transport.bodies[-1]["data"]["appliedVersion"] == "4711"


def test_a_status_that_cannot_be_written_is_one_line_on_stderr_and_changes_no_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack_file(tmp_path, {"infercrane:kubernetes": KUBERNETES})
    monkeypatch.setattr("infercrane_pulumi.cli.commands.run_stack_file", lambda *_, **__: APPLIED)
    transport = Recording(existing={"metadata": {"name": STATUS}})
    flags = ["--stack", NS, "--project-dir", str(tmp_path), "--status-configmap", STATUS, "--json"]
    code, out, err = run(["up", *flags], connect=lambda _: Cluster(transport), environ=ENVIRON)
    assert (code, json.loads(out)["ok"]) == (0, True)
    assert err == (
        f"up: status not written: ownership-conflict: ConfigMap/{NS}/{STATUS}: exists and is "
        f"not the run status of stack {NS}; left unchanged\n"
    )


def test_a_file_refused_whole_is_reported_where_the_last_file_put_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An alias bomb (or YAML that cannot be read) names no settings: the loop's next run
    reports it where the runs before it did, instead of nowhere (found on Kind)."""
    path = stack_file(tmp_path, {"infercrane:kubernetes": KUBERNETES})

    def engine(stack: Path, *_: Any, **__: Any) -> StackChanges:
        files.parse_stack_settings(stack.read_text(), source=str(stack))  # a bomb: no
        return APPLIED

    monkeypatch.setattr("infercrane_pulumi.cli.commands.run_stack_file", engine)
    transport = Recording()
    flags = ["--stack", NS, "--project-dir", str(tmp_path), "--status-configmap", STATUS]
    args = entry.parser().parse_args(["up", *flags, "--json"])
    args.format = "table"
    ctx = commands.Context(lambda _: Cluster(transport), ENVIRON, io.StringIO())
    where: dict[str, Any] = {}
    assert entry._once(args, ctx, io.StringIO(), where) == 0
    path.write_text("config: &a [*a]\n")  # an alias of itself: no settings in it
    assert entry._once(args, ctx, io.StringIO(), where) == errors.EXIT_CODES["invalid-config"]
    assert [body["data"]["result"] for body in transport.bodies] == ["applied", "failed"]
    assert transport.bodies[-1]["data"]["error"] == "invalid-config"
