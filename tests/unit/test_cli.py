"""The command line a reviewer and an operator use: output, exit codes, envelopes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from infercrane_pulumi import cli, errors, workloads
from infercrane_pulumi.cluster.client import Cluster, Response
from infercrane_pulumi.intents import load_stack_file
from infercrane_pulumi.kinds import DEPLOYMENT, POD, SERVICE
from infercrane_pulumi.review import offline_diff
from tests.unit import samples
from tests.unit.fake_cluster import FakeTransport
from tests.unit.gitrepos import STACK

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "stacks" / "Pulumi.demo.yaml"


def run(argv: list[str], **kwargs: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(argv, stdout=out, stderr=err, **kwargs)
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
        "apiVersion": "infercrane.dev/cli/v1",
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


def test_unreachable_cluster_exits_3_and_says_retry(tmp_path: Path) -> None:
    from infercrane_pulumi.errors import ClusterUnavailableError

    def unreachable(*_: Any) -> Any:
        raise ClusterUnavailableError("cannot reach the API server (MaxRetryError)")

    path = write_stack(tmp_path, samples.kubernetes(), [samples.replica()])
    code, _, err = run(["inspect", "--config", str(path)], connect=unreachable)
    assert code == 3
    assert err == "inspect: cannot reach the API server (MaxRetryError)\n"


SCHEMA = json.loads((ROOT / "infercrane_pulumi" / "schemas" / "envelope.schema.json").read_text())


def valid_envelope(out: str) -> dict[str, Any]:
    envelope: dict[str, Any] = json.loads(out)
    jsonschema.Draft202012Validator(SCHEMA).validate(envelope)
    return envelope


def cluster_with(answers: dict[tuple[str, str], Response]) -> Any:
    return lambda settings: Cluster(FakeTransport(answers))


def test_render_doctor_and_inspect_envelopes_follow_the_shipped_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
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
            [command, "--config", str(DEMO), "--json"], connect=cluster_with(listing)
        )
        assert code == (1 if command == "doctor" else 0), out
        envelope = valid_envelope(out)
        assert envelope["command"] == command
    inspected = valid_envelope(
        run(["inspect", "--config", str(DEMO), "--json"], connect=cluster_with(listing))[1]
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


# Where each command meets the outside world, and how a test breaks it there.
EDGES: dict[str, tuple[list[str], str]] = {
    "render": (["--config", str(DEMO)], "load_stack_file"),
    "doctor": (["--config", str(DEMO)], "connect"),
    "inspect": (["--config", str(DEMO)], "connect"),
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
    owner = offline_diff if edge == "diff_command" else cli
    monkeypatch.setattr(owner, edge, fail)
    return cluster_with({})


def test_every_command_is_in_the_table_and_in_the_schema() -> None:
    assert [c.name for c in cli.COMMANDS] == list(EDGES)
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
        "apiVersion": "infercrane.dev/cli/v1",
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
