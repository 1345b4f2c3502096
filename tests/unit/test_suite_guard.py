"""The suite-wide guard (``tests/runguard.py``, put on every test by ``tests/conftest.py``): a
``pulumi`` that would run the engine outside ``engine.process.run`` on the run path fails the test
that starts it, before it starts, however it is spelled and wherever; a person's run through the
named helper, a workspace command and a stand-in start."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation import project
from infercrane_pulumi.automation.engine import process
from tests import runguard
from tests.runguard import by_a_person

ROOT = Path(__file__).resolve().parents[2]
Start = Callable[[Path, Path], object]  # (the pulumi, a driver's workspace) -> started


@pytest.fixture
def pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``pulumi`` that records each call's arguments (``calls``), so a test sees whether the
    guard let it start. The test runs in its own directory: the SDK's ``PulumiCommand`` asks the
    CLI its version from the current one, which must not be the checkout."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "cli" / "bin" / "pulumi"
    script.parent.mkdir(parents=True)
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"with open({str(tmp_path / 'calls')!r}, 'a') as calls:\n"
        "    print(*sys.argv[1:], file=calls)\n"
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return project.write_project(tmp_path / "workspace")  # a driver's: no program file


def calls(tmp_path: Path) -> list[str]:
    """What the recording ``pulumi`` was started with, one call a line."""
    recorded = tmp_path / "calls"
    return recorded.read_text().splitlines() if recorded.exists() else []


def in_a_project_holding_its_program(cli: Path, workspace: Path) -> object:
    (workspace / "__main__.py").write_text("")  # as a person's project does
    return subprocess.run([cli, "up"], cwd=workspace, check=False)


# Each way around the old guard (it read the first word after `pulumi` as the operation, knew
# four of them, looked at argv only, and let any directory holding a `__main__.py` through),
# and what the refusal names as started.
BYPASSES: dict[str, tuple[Start, str]] = {
    "the verb's alias": (
        lambda cli, ws: subprocess.run([cli, "update", "--yes"], cwd=ws, check=False),
        "pulumi update --yes",
    ),
    "another engine verb": (
        lambda cli, ws: subprocess.run([cli, "import", "--yes"], cwd=ws, check=False),
        "pulumi import --yes",
    ),
    "--cwd before the verb": (
        lambda cli, ws: subprocess.Popen([cli, "--cwd", ws, "up", "--yes"]),
        "pulumi --cwd {ws} up --yes",
    ),
    "-C before the verb": (
        lambda cli, ws: subprocess.Popen([cli, "-C", ws, "preview"]),
        "pulumi -C {ws} preview",
    ),
    "a flag the guard does not know before a workspace verb": (
        lambda cli, ws: subprocess.Popen([cli, "--new-flag", "version", "up"], cwd=ws),
        "pulumi --new-flag version up",
    ),
    "sh -c": (
        lambda cli, ws: subprocess.run(["sh", "-c", f"{cli} up --yes"], cwd=ws, check=False),
        "pulumi up --yes",
    ),
    "shell=True": (
        lambda cli, ws: subprocess.run(f"cd {ws} && {cli} destroy", shell=True, check=False),
        "pulumi destroy",
    ),
    "a second line of a script": (
        lambda cli, ws: subprocess.run(["bash", "-ec", f"{cli} version\n{cli} up"], check=False),
        "pulumi up",
    ),
    "a shell in a shell": (
        lambda cli, ws: subprocess.run(["bash", "-c", f"sh -c '{cli} up'"], check=False),
        "pulumi up",
    ),
    "env": (
        lambda cli, ws: subprocess.run(["env", "A=1", cli, "up"], cwd=ws, check=False),
        "pulumi up",
    ),
    "env -S": (
        lambda cli, ws: subprocess.run(["env", "-S", f"{cli} up"], cwd=ws, check=False),
        "pulumi up",
    ),
    "os.system": (lambda cli, ws: os.system(f"{cli} refresh --yes"), "pulumi refresh --yes"),
    "os.posix_spawn under another argv[0]": (
        lambda cli, ws: os.posix_spawn(cli, ["deploy", "up"], os.environ),
        "pulumi up",
    ),
    "Popen's executable under another argv[0]": (
        lambda cli, ws: subprocess.run(["deploy", "up"], executable=cli, cwd=ws, check=False),
        "pulumi up",
    ),
    "the SDK's PulumiCommand": (
        lambda cli, ws: auto.PulumiCommand(
            root=str(cli.parent.parent), skip_version_check=True
        ).run(["destroy", "--yes"], str(ws), {}),
        "pulumi --non-interactive destroy --yes",
    ),
    "a project holding its program": (in_a_project_holding_its_program, "pulumi up"),
    "the repository's root": (
        lambda cli, ws: subprocess.run([cli, "up"], cwd=ROOT, check=False),
        "pulumi up",
    ),
    "engine.process.run off the run path": (
        lambda cli, ws: process.run(
            auto.PulumiCommand(root=str(cli.parent.parent), skip_version_check=True),
            ["up", "--yes"],
            str(ws),
            {},
            on_output=None,
            event_log=ws / "events.jsonl",
        ),
        "pulumi --non-interactive up --yes --json",
    ),
}


@pytest.mark.parametrize("way", sorted(BYPASSES))
def test_an_engine_run_outside_the_run_path_fails_before_it_starts(
    pulumi: Path, workspace: Path, tmp_path: Path, way: str
) -> None:
    start, said = BYPASSES[way]
    with pytest.raises(AssertionError) as caught:
        start(pulumi, workspace)
    command, suffix = str(caught.value).split(" started ", 1)
    # The words of the command, whatever their order: the SDK's PulumiCommand puts its
    # `--non-interactive` first or last, as its version does.
    assert sorted(command.split()) == sorted(said.format(ws=workspace).split())
    assert suffix == f"outside the run path, from {__name__}"
    # Only the SDK's own version check, where the case makes a ``PulumiCommand``, ran.
    assert set(calls(tmp_path)) <= {"version"}


# What may start from anywhere: commands that start no engine, a person's run through the
# named helper, and a stand-in; and the call each makes.
LET_THROUGH: dict[str, tuple[Start, str]] = {
    "a workspace command": (
        lambda cli, ws: subprocess.run([cli, "stack", "output", "--json"], cwd=ws, check=True),
        "stack output --json",
    ),
    "a workspace command after the CLI's own flags": (
        lambda cli, ws: subprocess.run(
            [cli, "--cwd", ws, "--non-interactive", "config", "set-all"], check=True
        ),
        "--cwd {ws} --non-interactive config set-all",
    ),
    "help on an engine verb": (
        lambda cli, ws: subprocess.run(["sh", "-c", f"{cli} preview --help"], check=True),
        "preview --help",
    ),
    "a person's run through the named helper": (
        lambda cli, ws: by_a_person(subprocess.run, [cli, "up", "--yes"], cwd=ws, check=True),
        "up --yes",
    ),
    "a person's shell through the named helper": (
        lambda cli, ws: by_a_person(
            subprocess.Popen, ["bash", "-c", f"cd {ws} && {cli} destroy --yes"]
        ).wait(),
        "destroy --yes",
    ),
    "a stand-in": (
        lambda cli, ws: subprocess.run([runguard.stand_in_cli(cli), "up"], cwd=ws, check=True),
        "up",
    ),
}


@pytest.mark.parametrize("way", sorted(LET_THROUGH))
def test_what_starts_no_engine_or_is_named_starts(
    pulumi: Path, workspace: Path, tmp_path: Path, way: str
) -> None:
    start, call = LET_THROUGH[way]
    start(pulumi, workspace)
    assert calls(tmp_path) == [call.format(ws=workspace)]


def test_the_engine_s_process_on_the_run_path_is_the_one_engine_run_let_through() -> None:
    # The run path's own frames cannot be made in a unit test: the rule, judged as the hook
    # judges a start it saw (the conformance suite starts every real run this way).
    up = ["/bin/pulumi", "--non-interactive", "up", "--yes", "--json"]
    judged = {
        (starter.__name__, on_run_path): runguard.refusal(
            up, shell=False, starter=starter.__code__, on_run_path=on_run_path, named="m"
        )
        for starter in (process.run, process.set_secret)
        for on_run_path in (True, False)
    }
    refused = "pulumi --non-interactive up --yes --json started outside the run path, from m"
    assert judged == {
        ("run", True): None,
        ("run", False): refused,
        ("set_secret", True): refused,
        ("set_secret", False): refused,
    }


@pytest.mark.parametrize(
    ("words", "starts_no_engine"),
    [
        (["version"], True),
        (["--non-interactive", "stack", "select", "--stack", "s"], True),
        (["--color=never", "-C", "d", "stack", "export"], True),
        (["--verbose", "9", "cancel", "--yes"], True),
        (["config", "set", "--secret", "--path", "k"], True),
        (["up", "--yes", "--help"], True),
        (["stack"], False),
        (["stack", "rename", "t"], False),
        (["import", "--file", "f"], False),
        (["watch"], False),
        (["--tracing", "version", "up"], False),  # --tracing takes "version" as its value
        (["-x", "version"], False),
        (["up", "--", "--help"], False),
        ([], False),
    ],
)
def test_workspace_commands_are_known_by_name_anything_else_runs_the_engine(
    words: list[str], starts_no_engine: bool
) -> None:
    assert runguard.workspace_command(words) is starts_no_engine
