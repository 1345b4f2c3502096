"""Every process of an engine run ends with it (``engine.marks``), for real: a stand-in
``pulumi`` starts a "plugin" in a process group of its own, as Pulumi starts each plugin, and
then dies of a signal, or hangs past the run's deadline."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation.engine import marks, process
from infercrane_pulumi.errors import RunTimeoutError
from tests.runguard import stand_in_cli

STAND_IN = textwrap.dedent(
    """\
    import os, signal, subprocess, sys, time
    if sys.argv[1:] == ["version"]:
        print("v3.274.0")
        sys.exit(0)
    plugin = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], process_group=0
    )
    with open(os.environ["PLUGIN_PID"], "w") as record:
        record.write(str(plugin.pid))
    if os.environ["END"] == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a CLI that does not stop when cancelled
    time.sleep(600)
    """
)


@pytest.fixture
def pulumi(tmp_path: Path) -> auto.PulumiCommand:
    script = tmp_path / "cli" / "bin" / "pulumi"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{sys.executable}\n{STAND_IN}", encoding="utf-8")
    script.chmod(0o755)
    stand_in_cli(script)
    return auto.PulumiCommand(root=str(tmp_path / "cli"), skip_version_check=True)


def ended(pid: int) -> bool:
    stat = marks.read_stat(pid)
    return stat is None or not stat.alive


def test_a_cli_killed_by_a_signal_leaves_no_plugin_running(
    pulumi: auto.PulumiCommand, tmp_path: Path
) -> None:
    given = {"PLUGIN_PID": str(tmp_path / "plugin"), "END": "killed"}
    with pytest.raises(auto.errors.CommandError):
        process.run(
            pulumi, ["up"], str(tmp_path), given, on_output=None, event_log=tmp_path / "log"
        )
    plugin = int((tmp_path / "plugin").read_text())
    assert ended(plugin)


def test_a_run_past_its_deadline_is_cancelled_then_killed_with_its_plugins(
    pulumi: auto.PulumiCommand, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(process, "CANCEL_SECONDS", 0.5)
    given = {"PLUGIN_PID": str(tmp_path / "plugin"), "END": "hangs"}
    with pytest.raises(RunTimeoutError) as stopped:
        process.run(
            pulumi,
            ["up"],
            str(tmp_path),
            given,
            on_output=None,
            event_log=tmp_path / "log",
            # Long enough for the stand-in to start its plugin on a loaded machine.
            deadline=time.monotonic() + 8,
        )
    assert stopped.value.retryable
    assert stopped.value.problems == (
        "up: stopped at its deadline; the next run recovers what it left",
    )
    plugin = int((tmp_path / "plugin").read_text())
    assert ended(plugin)
