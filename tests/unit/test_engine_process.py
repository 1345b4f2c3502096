"""An engine run's CLI process, run for real (a stand-in ``pulumi`` script): its display to a
terminal beside its event log, or, with nobody watching, its JSON display as the event log, and
its failures classified as the SDK classifies them."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation.engine import process
from tests.runguard import stand_in_cli

# Records how it was called, prints `lines` lines of display and `noise` bytes of stderr (more
# than a pipe holds, so a reader that waits on one pipe first would block), then fails with
# `message` on stderr if given.
STAND_IN = textwrap.dedent(
    """\
    import json, os, sys
    if sys.argv[1:] == ["version"]:
        print("v3.274.0")
        sys.exit(0)
    call = {"args": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
                                          if k.startswith(("PULUMI_", "GIVEN"))},
            "stdin": sys.stdin.read()}
    with open(os.environ["RECORD"], "w") as record:
        json.dump(call, record)
    for n in range(int(os.environ["LINES"])):
        print(f"line {n}")
    sys.stderr.write("x" * int(os.environ["NOISE"]) + "\\n")
    if os.environ.get("MESSAGE"):
        sys.stderr.write(os.environ["MESSAGE"] + "\\n")
        sys.exit(255)
    """
)


@pytest.fixture
def pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> auto.PulumiCommand:
    for name in [name for name in os.environ if name.startswith("PULUMI_")]:
        monkeypatch.delenv(name)  # only what the run sets reaches the stand-in
    bin_dir = tmp_path / "cli" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "pulumi"
    script.write_text(f"#!{sys.executable}\n{STAND_IN}", encoding="utf-8")
    script.chmod(0o755)
    stand_in_cli(script)
    return auto.PulumiCommand(root=str(tmp_path / "cli"), skip_version_check=True)


def env(tmp_path: Path, *, lines: int, noise: int = 0, message: str = "") -> dict[str, str]:
    return {
        "RECORD": str(tmp_path / "call.json"),
        "LINES": str(lines),
        "NOISE": str(noise),
        "MESSAGE": message,
        "GIVEN": "yes",
    }


def recorded(tmp_path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((tmp_path / "call.json").read_text())
    return loaded


def test_a_watched_run_prints_the_display_line_by_line(
    pulumi: auto.PulumiCommand, tmp_path: Path
) -> None:
    printed: list[str] = []
    given = env(tmp_path, lines=3, noise=200_000)
    log = tmp_path / "events.jsonl"

    process.run(
        pulumi, ["up", "--yes"], str(tmp_path), given, on_output=printed.append, event_log=log
    )

    assert printed == ["line 0", "line 1", "line 2"]
    assert recorded(tmp_path) == {
        "args": ["--non-interactive", "up", "--yes", "--event-log", str(log)],
        "env": {"GIVEN": "yes", "PULUMI_AUTOMATION_API": "true", "PULUMI_DEBUG_COMMANDS": "true"},
        "stdin": "",  # an engine run's stdin is /dev/null
    }


def test_an_unwatched_run_writes_the_streamed_json_display_as_its_event_log(
    pulumi: auto.PulumiCommand, tmp_path: Path
) -> None:
    given = env(tmp_path, lines=100_000, noise=200_000)
    log = tmp_path / "events.jsonl"

    process.run(pulumi, ["preview", "--diff"], str(tmp_path), given, on_output=None, event_log=log)

    assert recorded(tmp_path) == {
        "args": ["--non-interactive", "preview", "--diff", "--json"],
        "env": {
            "GIVEN": "yes",
            "PULUMI_AUTOMATION_API": "true",
            "PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "true",
        },
        "stdin": "",
    }
    assert log.read_text().splitlines() == [f"line {n}" for n in range(100_000)]


@pytest.mark.parametrize(
    ("message", "raised"),
    [
        ("error: the stack is currently locked by 1 lock(s)", auto.errors.ConcurrentUpdateError),
        ("error: no stack named 'dev' found", auto.errors.StackNotFoundError),
        ("error: update failed", auto.errors.CommandError),
    ],
)
@pytest.mark.parametrize("watched", [True, False])
def test_a_failure_is_classified_from_stderr_as_the_sdk_does(
    pulumi: auto.PulumiCommand,
    tmp_path: Path,
    message: str,
    raised: type[auto.errors.CommandError],
    watched: bool,
) -> None:
    given = env(tmp_path, lines=2, noise=200_000, message=message)
    printed: list[str] = []
    log = tmp_path / "events.jsonl"

    with pytest.raises(auto.errors.CommandError) as failure:
        process.run(
            pulumi,
            ["up"],
            str(tmp_path),
            given,
            on_output=printed.append if watched else None,
            event_log=log,
        )

    assert type(failure.value) is raised
    assert f"code: 255\n stdout: \n stderr: {'x' * 200_000}\n{message}" in str(failure.value)
    assert printed == (["line 0", "line 1"] if watched else [])
    assert log.read_text() == ("" if watched else "line 0\nline 1\n")


def test_a_secret_reaches_the_cli_on_stdin_never_in_its_arguments(
    pulumi: auto.PulumiCommand, tmp_path: Path
) -> None:
    value = "apiVersion: v1\nusers:\n- user: {token: s3cret}\n"
    process.set_secret(
        pulumi,
        stack="s1",
        path="infercrane:kubernetes.kubeconfig",
        value=value,
        cwd=str(tmp_path),
        env=env(tmp_path, lines=0),
    )
    call = recorded(tmp_path)
    assert call["args"] == [
        "--non-interactive",
        *("config", "set", "--secret", "--path", "infercrane:kubernetes.kubeconfig"),
        *("--stack", "s1"),
    ]
    assert call["stdin"] == value + "\n"  # the CLI drops one trailing newline: this one


def test_a_secret_the_cli_refuses_is_its_error_without_the_value(
    pulumi: auto.PulumiCommand, tmp_path: Path
) -> None:
    given = env(tmp_path, lines=0, message="error: no stack named 's1' found")
    with pytest.raises(auto.errors.StackNotFoundError) as refused:
        process.set_secret(
            pulumi, stack="s1", path="k", value="s3cret", cwd=str(tmp_path), env=given
        )
    assert "s3cret" not in str(refused.value)
