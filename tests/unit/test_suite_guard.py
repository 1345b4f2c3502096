"""The suite-wide guard (``tests/conftest.py``) fires: an engine operation started outside the
one run path fails the test that started it, whatever starts the process, before it starts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation import project


@pytest.fixture
def pulumi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``pulumi`` that records that it ran (in its working directory), so a test sees whether
    the guard let it start. The test runs in its own directory: the SDK's ``PulumiCommand``
    asks the CLI its version from the current one, which must not be the checkout."""
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "cli" / "bin" / "pulumi"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{sys.executable}\nimport pathlib\npathlib.Path('ran').touch()\n")
    script.chmod(0o755)
    return script


def test_an_engine_operation_outside_the_run_path_fails_before_it_starts(
    pulumi: Path, tmp_path: Path
) -> None:
    workspace = project.write_project(tmp_path / "workspace")  # a driver's: no program file
    sdk = auto.PulumiCommand(root=str(pulumi.parent.parent), skip_version_check=True)
    starts: list[Callable[[], object]] = [
        lambda: subprocess.Popen([str(pulumi), "up", "--yes"], cwd=workspace),
        lambda: subprocess.run([str(pulumi), "preview"], cwd=workspace, check=False),
        lambda: sdk.run(["destroy", "--yes"], str(workspace), {}),
    ]
    for start, verb in zip(starts, ("up", "preview", "destroy"), strict=True):
        with pytest.raises(AssertionError) as caught:
            start()
        assert str(caught.value) == (f"pulumi {verb} started outside the run path, from {__name__}")
    assert not (workspace / "ran").exists()


def test_a_person_s_project_and_other_commands_are_let_through(
    pulumi: Path, tmp_path: Path
) -> None:
    person = tmp_path / "by-hand"
    person.mkdir()
    (person / "__main__.py").write_text("")  # a person's project holds its program
    subprocess.run([str(pulumi), "up", "--yes"], cwd=person, check=True)
    assert (person / "ran").exists()
    workspace = project.write_project(tmp_path / "workspace")
    subprocess.run([str(pulumi), "stack", "output", "--json"], cwd=workspace, check=True)
    assert (workspace / "ran").exists()
