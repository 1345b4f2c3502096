"""The command line a reviewer and an operator use: output, exit codes, envelopes."""

from __future__ import annotations

import dataclasses
import io
import json
import os
from pathlib import Path
from typing import Any, get_args

import jsonschema
import pytest
import yaml
from pulumi import automation as auto

from infercrane_pulumi import errors
from infercrane_pulumi.automation import (
    NamespaceStack,
    PulumiEnvironment,
    namespaces,
    results,
    stackfiles,
)
from infercrane_pulumi.cli import commands, entry, views
from infercrane_pulumi.cluster import client
from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.config import files, kubeconfigs
from infercrane_pulumi.config.files import load_stack_file, stack_file
from infercrane_pulumi.config.intents import PolicySettings, RuleId, StackConfig
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.kinds import DEPLOYMENT, POD, SERVICE
from infercrane_pulumi.review import offline_diff
from tests.unit import samples
from tests.unit.fake_cluster import FakeTransport
from tests.unit.fake_stacks import serve
from tests.unit.gitrepos import STACK
from tests.unit.test_run import applied as live_objects
from tests.unit.test_run import record

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "stacks" / "Pulumi.demo.yaml"
DEMO_CONFIG = load_stack_file(DEMO)
# What the demo stack's outputs say it applied: its intents, objects and settings.
APPLIED_RECORD = dataclasses.replace(record(DEMO_CONFIG), settings=DEMO_CONFIG.kubernetes)


def run(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = entry.main(argv, stdout=out, stderr=err, **kwargs)
    return code, out.getvalue(), err.getvalue()


def write_stack(tmp_path: Path, kubernetes: Any, replicas: Any) -> Path:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(
        yaml.safe_dump(
            {"config": {"infercrane:kubernetes": kubernetes, "infercrane:replicas": replicas}}
        )
    )
    return path


def test_render_prints_the_objects_without_a_cluster() -> None:
    def no_cluster(*_: Any) -> Any:
        raise AssertionError("render must not connect")

    code, out, err = run(["render", "--config", str(DEMO)], connect=no_cluster)
    assert (code, err) == (0, "")
    # Byte for byte: tests/unit/test_rendered.py.
    assert out == (ROOT / "tests" / "fixtures" / "rendered" / "demo.yaml").read_text()


def test_render_json_is_a_versioned_envelope() -> None:
    code, out, _ = run(["render", "--config", str(DEMO), "--json"])
    envelope = json.loads(out)
    assert code == 0
    assert {k: envelope[k] for k in ("apiVersion", "command", "ok")} == {
        "apiVersion": "infercrane.dev/cli/v2",
        "command": "render",
        "ok": True,
    }
    assert len(envelope["result"]) == 4


def test_invalid_config_exits_2_one_line_per_problem_and_nothing_on_stdout(
    tmp_path: Path,
) -> None:
    path = write_stack(
        tmp_path, {"context": "c", "imageDigest": "vllm:latest"}, [samples.replica(port=0)]
    )
    code, out, err = run(["render", "--config", str(path)])
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "render: infercrane:kubernetes.imageDigest: must be digest-pinned as "
        "<repository>@sha256:<64 lowercase hex>, got 'vllm:latest'",
        "render: infercrane:replicas[0].port: Input should be greater than or equal to 1",
    ]


def test_missing_file_is_invalid_input(tmp_path: Path) -> None:
    code, out, err = run(["render", "--config", str(tmp_path / "absent.yaml")])
    assert (code, out) == (2, "")
    assert "cannot read" in err


def test_invalid_config_as_json_envelope(tmp_path: Path) -> None:
    path = write_stack(tmp_path, {"context": "c"}, [])
    code, out, _ = run(["doctor", "--config", str(path), "--json"])
    assert code == 2
    assert json.loads(out)["error"] == {
        "code": "invalid-config",
        "retryable": False,
        "problems": ["infercrane:kubernetes.imageDigest: is required"],
    }


def test_unreachable_cluster_exits_3_and_says_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infercrane_pulumi.errors import ClusterUnavailableError

    def unreachable(*_: Any) -> Any:
        raise ClusterUnavailableError("cannot reach the API server (MaxRetryError)")

    serve(monkeypatch, APPLIED_RECORD)
    path = write_stack(tmp_path, samples.kubernetes(), [samples.replica()])
    code, _, err = run(["inspect", "--config", str(path)], connect=unreachable, environ=BACKEND)
    assert code == 3
    assert err == "inspect: cannot reach the API server (MaxRetryError)\n"


SCHEMA = json.loads((ROOT / "infercrane_pulumi" / "schemas" / "envelope.schema.json").read_text())


def valid_envelope(out: str) -> dict[str, Any]:
    envelope: dict[str, Any] = json.loads(out)
    jsonschema.Draft202012Validator(SCHEMA).validate(envelope)
    return envelope


def cluster_with(answers: dict[tuple[str, str], Response]) -> Any:
    return lambda settings: Cluster(FakeTransport(answers))


def test_render_doctor_and_inspect_envelopes_follow_the_shipped_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    serve(monkeypatch, APPLIED_RECORD)
    objects = workloads.stack_objects(load_stack_file(DEMO))
    listing = {
        ("GET", DEPLOYMENT.collection("infercrane-system")): Response(
            200, {"items": [o for o in objects if o["kind"] == "Deployment"]}
        ),
        ("GET", SERVICE.collection("infercrane-system")): Response(200, {"items": []}),
        ("GET", POD.collection("infercrane-system")): Response(403, {"reason": "Forbidden"}),
        ("GET", "/version"): Response(200, {"gitVersion": "v1.36.3"}),
    }
    for command in ("render", "doctor", "inspect"):
        code, out, _ = run(
            [command, "--config", str(DEMO), "--json"],
            connect=cluster_with(listing),
            environ=BACKEND,
        )
        assert code == (1 if command == "doctor" else 0), out
        envelope = valid_envelope(out)
        assert envelope["command"] == command
    inspected = valid_envelope(
        run(
            ["inspect", "--config", str(DEMO), "--json"],
            connect=cluster_with(listing),
            environ=BACKEND,
        )[1]
    )
    assert [(r["externalKey"], r["state"]) for r in inspected["result"]] == [
        ("demo-qwen3-8b-r0", "degraded"),
        ("demo-sglang-r0", "degraded"),
    ]


def test_an_error_envelope_follows_the_shipped_schema(tmp_path: Path) -> None:
    path = write_stack(tmp_path, {"context": "c"}, [])
    code, out, _ = run(["inspect", "--config", str(path), "--json"])
    assert code == 2
    assert valid_envelope(out)["ok"] is False


def test_a_stack_run_without_backend_or_passphrase_is_invalid_input_naming_both() -> None:
    code, out, err = run(["up", "--stack", "demo", "--project-dir", str(ROOT)], environ={})
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "up: no backend: pass --backend-url or set PULUMI_BACKEND_URL",
        "up: no passphrase: pass --passphrase-file or set PULUMI_CONFIG_PASSPHRASE(_FILE)",
    ]


def test_a_backend_whose_locks_cannot_be_read_is_invalid_input_without_a_lease(
    tmp_path: Path,
) -> None:
    environ = {
        "PULUMI_BACKEND_URL": "s3://state",
        "PULUMI_CONFIG_PASSPHRASE": "p",
        "PULUMI_HOME": str(tmp_path),
    }
    code, out, err = run(["up", "--stack", "demo", "--project-dir", str(ROOT)], environ=environ)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "up: backend s3://state: its stack locks cannot be read from this process, so a run "
        "could not prove it holds a stack alone; give a PostgreSQL database for stack leases "
        "(lease_url=, --lease-url or $INFERCRANE_LEASE_URL)"
    ]
    assert list(tmp_path.iterdir()) == []  # nothing written


# Where each command meets the outside world, and how a test breaks it there.
EDGES: dict[str, tuple[list[str], str]] = {
    "render": (["--config", str(DEMO)], "load_stack_file"),
    "doctor": (["--config", str(DEMO)], "connect"),
    "inspect": (["--config", str(DEMO)], "inspect_stack_file"),
    "preview": (["--stack", "demo", "--project-dir", str(ROOT)], "run_stack_file"),
    "up": (["--stack", "demo", "--project-dir", str(ROOT)], "run_stack_file"),
    "remove": (["--stack", "demo", "--project-dir", str(ROOT), "--key", "k"], "run_stack_file"),
    "destroy": (["--stack", "demo", "--project-dir", str(ROOT)], "run_stack_file"),
    "diff": (["--base", "HEAD", "--all", "--project-dir", str(ROOT)], "diff_command"),
}
BACKEND = {"PULUMI_BACKEND_URL": "file:///nowhere", "PULUMI_CONFIG_PASSPHRASE": "p"}


def broken_at(edge: str, error: BaseException, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make the command's edge raise ``error``; returns the ``connect`` to pass to ``main``."""

    def fail(*_: Any, **__: Any) -> Any:
        raise error

    if edge == "connect":
        return fail
    owner = offline_diff if edge == "diff_command" else commands
    monkeypatch.setattr(owner, edge, fail)
    return cluster_with({})


def test_every_command_is_in_the_table_and_in_the_schema() -> None:
    assert [c.name for c in commands.COMMANDS] == list(EDGES)
    assert SCHEMA["properties"]["command"]["enum"] == list(EDGES)
    assert SCHEMA["$defs"]["error"]["properties"]["code"]["enum"] == list(errors.ERRORS)


@pytest.mark.parametrize("command", list(EDGES))
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_foreign_exception_at_any_edge_is_an_internal_error_never_a_traceback(
    command: str, as_json: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags, edge = EDGES[command]
    leak = "token-c2VjcmV0LWtleQ"  # a foreign message may carry anything
    connect = broken_at(edge, OSError(f"connection to https://u:{leak}@host failed"), monkeypatch)
    code, out, err = run(
        [command, *flags, *(["--json"] if as_json else [])], connect=connect, environ=BACKEND
    )
    assert code == errors.EXIT_FAILED
    line = f"{command}: unexpected OSError; please report it"
    if as_json:
        assert valid_envelope(out)["error"] == {
            "code": "internal-error",
            "retryable": False,
            "problems": [line],
        }
    else:
        assert (out, err) == ("", f"{command}: {line}\n")
    assert leak not in out + err and "Traceback" not in out + err


@pytest.mark.parametrize("code", list(errors.ERRORS))
@pytest.mark.parametrize("command", ["inspect", "up", "diff"])
def test_each_typed_error_exits_with_its_documented_code_and_envelope(
    code: str, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags, edge = EDGES[command]
    error = errors.ERRORS[code](["subject: what went wrong"])
    connect = broken_at(edge, error, monkeypatch)
    exit_code, out, err = run([command, *flags, "--json"], connect=connect, environ=BACKEND)
    assert (exit_code, err) == (errors.EXIT_CODES[code], "")
    assert valid_envelope(out) == {
        "apiVersion": "infercrane.dev/cli/v2",
        "command": command,
        "ok": False,
        "error": {"code": code, "retryable": error.retryable, "problems": [error.problems[0]]},
    }


def test_diff_prints_the_comment_and_a_schema_valid_envelope(repo: Path) -> None:
    stack = str(repo / STACK)
    code, out, err = run(["diff", "--base", "base", "--config", stack, "--project-dir", str(repo)])
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "### InferCrane offline diff"
    assert "#### InferCrane `diff` on infercrane/test" in out
    assert "Plan: 2 to add, 1 to change, 2 to destroy, 1 unchanged" in out
    code, out, _ = run(
        ["diff", "--base", "base", "--all", "--project-dir", str(repo), "--format", "json"]
    )
    envelope = valid_envelope(out)
    assert code == 0 and [d["stack"] for d in envelope["result"]] == ["test"]


def test_diff_against_a_ref_that_does_not_exist_is_one_line_exit_2(repo: Path) -> None:
    code, out, err = run(["diff", "--base", "nope", "--all", "--project-dir", str(repo)])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("diff: base nope: no such commit")


def pending_edits(project_dir: Path) -> Path:
    """The demo stack file with edits not yet applied: another image for every key, one key
    dropped, one added."""
    document = yaml.safe_load(DEMO.read_text())
    section = document["config"]
    section["infercrane:kubernetes"]["imageDigest"] = samples.IMAGE
    section["infercrane:replicas"][1:] = [samples.replica(externalKey="pending-r0")]
    path = project_dir / "stacks" / "Pulumi.demo.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def namespace_stack(tmp_path: Path, path: Path) -> NamespaceStack:
    """A control plane's stack holding the same pending settings as the file at ``path``."""
    env = PulumiEnvironment(
        state_dir=tmp_path / "state",
        pulumi_home=tmp_path,
        passphrase="p",
        kubeconfig=tmp_path / "kubeconfig",
    )
    settings = load_stack_file(path).kubernetes
    return NamespaceStack(settings, env, tmp_path / "ws", stack_name="demo")


def test_inspect_and_observe_judge_what_the_stack_applied_never_pending_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, APPLIED_RECORD)
    transport = FakeTransport(live=live_objects(DEMO_CONFIG))
    images: list[str] = []

    def connect(settings: Any) -> Cluster:
        images.append(settings.image_digest)
        return Cluster(transport)

    monkeypatch.setattr(client, "connect", connect)  # NamespaceStack's
    path = pending_edits(tmp_path)
    code, out, err = run(
        ["inspect", "--config", str(path), "--json"], connect=connect, environ=BACKEND
    )
    assert (code, err) == (0, "")
    inspected = valid_envelope(out)["result"]
    # The applied intent hash matches: no "carries another intent" for the pending image; the
    # dropped key is still the stack's, the added one is not yet.
    assert [(r["externalKey"], r["state"], r["reason"]) for r in inspected] == [
        ("demo-qwen3-8b-r0", "provisioning", "generation 1 not yet observed by its controller"),
        ("demo-sglang-r0", "provisioning", "generation 1 not yet observed by its controller"),
    ]
    assert views.to_json(namespace_stack(tmp_path, path).observe()) == inspected
    assert images == [DEMO_CONFIG.kubernetes.image_digest] * 2


def test_inspect_of_an_in_cluster_stack_reads_it_as_the_pods_service_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``in-cluster`` names no kubeconfig; the run resolves the Pod's once, and what the stack
    applied is judged under it (it was refused once as a kubeconfig written beside
    ``in-cluster``: the Kind suite's runner Pod found it)."""
    pod = tmp_path / "serviceaccount"
    pod.mkdir()
    (pod / "token").write_text("the-projected-token")
    (pod / "ca.crt").write_text("the cluster's CA")
    monkeypatch.setattr(kubeconfigs, "SERVICE_ACCOUNT_DIR", pod)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    in_cluster = DEMO_CONFIG.kubernetes.model_copy(update={"context": "in-cluster"})
    serve(monkeypatch, dataclasses.replace(APPLIED_RECORD, settings=in_cluster))
    transport = FakeTransport(live=live_objects(DEMO_CONFIG))
    reached: list[tuple[str, str | None]] = []

    def connect(settings: Any) -> Cluster:
        reached.append((settings.context, settings.kubeconfig))
        return Cluster(transport)

    path = pending_edits(tmp_path)
    document = yaml.safe_load(path.read_text())
    document["config"]["infercrane:kubernetes"]["context"] = "in-cluster"
    path.write_text(yaml.safe_dump(document))
    code, out, err = run(
        ["inspect", "--config", str(path), "--json"], connect=connect, environ=BACKEND
    )
    assert (code, err) == (0, ""), out
    assert reached == [("in-cluster", kubeconfigs.in_cluster(dict(os.environ)))]


def test_remove_runs_what_the_stack_applied_without_the_key_never_pending_edits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve(monkeypatch, APPLIED_RECORD)
    runs: list[tuple[str, StackConfig, Any, dict[str, Any]]] = []

    def engine(stack: Any, env: Any, operation: str, config: StackConfig, **kw: Any) -> Any:
        written = yaml.safe_load(stack_file(stack.project_dir, stack.name).read_text())
        runs.append((operation, config, kw["applied"], written["config"]))
        return results.stack_result(operation, stack.name, workloads.render(config, stack=None), [])

    monkeypatch.setattr(stackfiles, "run", engine)
    monkeypatch.setattr(namespaces, "run", engine)
    path = pending_edits(tmp_path)
    argv = ["remove", "--stack", "demo", "--project-dir", str(tmp_path), "--key", "demo-sglang-r0"]
    # The driver's kubeconfig as NamespaceStack's environment names it: both runs are handed it.
    kubeconfig = tmp_path / "kubeconfig"
    code, out, err = run([*argv, "--json"], environ={**BACKEND, "KUBECONFIG": str(kubeconfig)})
    assert (code, err) == (0, "")
    namespace_stack(tmp_path, path).remove("demo-sglang-r0")
    kept = DEMO_CONFIG.replicas[0]
    off = PolicySettings.judging_nothing()
    expected = kubeconfigs.for_run(
        DEMO_CONFIG.model_copy(update={"replicas": (kept,), "policy": off}), kubeconfig
    )
    # Not the stack file's policy (a pending edit like its intents): none, a removal only
    # deletes.
    what_the_program_reads = {
        "infercrane:kubernetes": files.settings_record(DEMO_CONFIG.kubernetes),
        "infercrane:replicas": [kept.model_dump(mode="json", by_alias=True)],
        "infercrane:policy": {"enforcement": dict.fromkeys(get_args(RuleId), "disabled")},
    }
    assert runs == [("up", expected, APPLIED_RECORD, what_the_program_reads)] * 2
    assert valid_envelope(out)["result"] == views.stack_changes(
        results.stack_result("up", "demo", workloads.render(expected, stack=None), [])
    )


def test_engine_diagnostics_on_the_events_stream_are_sanitized_as_the_runs_errors_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    diagnostic = auto.EngineEvent.from_json(
        {
            "sequence": 7,
            "timestamp": 0,
            "diagnosticEvent": {
                "message": "  error: GET https://admin:hunter2@api.example/v1 failed\n"
                "    Authorization: Bearer abc.def\n",
                "color": "never",
                "severity": "error",
            },
        }
    )

    def engine(*_: Any, options: Any, **__: Any) -> Any:
        options.on_event(diagnostic)
        return results.stack_result("up", "demo", workloads.render(DEMO_CONFIG, stack=None), [])

    monkeypatch.setattr(commands, "run_stack_file", engine)
    argv = ["up", "--stack", "demo", "--project-dir", str(ROOT), "--events", "--json"]
    code, _, err = run(argv, environ=BACKEND)
    assert code == 0
    assert [json.loads(line) for line in err.splitlines()] == [
        {
            "apiVersion": "infercrane.dev/progress/v1",
            "sequence": 7,
            "type": "diagnostic",
            "severity": "error",
            "message": "error: GET https://***@api.example/v1 failed\n"
            "    Authorization: Bearer ***",
        }
    ]


def test_a_pack_configuration_without_a_pack_is_invalid_input() -> None:
    code, out, err = run(
        ["up", "--stack", "demo", "--project-dir", str(ROOT), "--policy-pack-config", "c.json"],
        environ=BACKEND,
    )
    assert (code, out, err) == (2, "", "up: --policy-pack-config: needs --policy-pack\n")


def test_no_cli_on_path_is_invalid_input_naming_how_to_get_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It ended as ``internal-error: up: unexpected FileNotFoundError``."""
    monkeypatch.setenv("PATH", str(tmp_path))
    argv = ["up", "--stack", "demo", "--project-dir", str(ROOT), "--json"]
    argv += ["--backend-url", (tmp_path / "state").as_uri()]
    code, out, _ = run(argv, environ={"PULUMI_CONFIG_PASSPHRASE": "p", "KUBECONFIG": "/none"})
    [problem] = json.loads(out)["error"]["problems"]
    assert (code, problem.split(":")[0]) == (2, "pulumi CLI")
    assert "hack/tools/build.sh" in problem


@pytest.mark.parametrize("where", ["empty/bin", "tools"], ids=["no pulumi", "not named bin"])
def test_a_tools_directory_without_the_cli_is_invalid_input_not_an_internal_error(
    tmp_path: Path, where: str
) -> None:
    """It ended as ``internal-error: up: unexpected FileNotFoundError``."""
    tools = tmp_path / where
    tools.mkdir(parents=True)
    if where == "tools":
        (tools / "pulumi").write_text("")
    argv = ["up", "--stack", "demo", "--project-dir", str(ROOT), "--json"]
    argv += ["--backend-url", (tmp_path / "state").as_uri(), "--tools-bin", str(tools)]
    code, out, _ = run(argv, environ={"PULUMI_CONFIG_PASSPHRASE": "p", "KUBECONFIG": "/none"})
    assert (code, json.loads(out)["error"]["problems"]) == (
        2,
        [
            f"tools bin {tools} (--tools-bin, $INFERCRANE_TOOLS_BIN): not a directory named bin "
            "holding the pulumi CLI (hack/tools/build.sh --bin-dir prints one)"
        ],
    )
