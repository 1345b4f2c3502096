"""A session of the suite fails when a test leaves an engine process running
(``tests/leftovers.py``, ``tests/conftest.py``): run for real, an inner session whose one test
starts a ``pulumi-...`` process and forgets it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The suite's own rules (``-p tests.conftest``) on a test outside tests/.
INNER_PYTEST = (
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "tests.conftest",
)


def test_a_session_whose_test_leaves_an_engine_process_fails_naming_the_test(
    tmp_path: Path,
) -> None:
    plugin = tmp_path / "pulumi-resource-leftover"
    shutil.copy("/bin/sleep", plugin)
    pid_file = tmp_path / "pid"
    (tmp_path / "test_inner.py").write_text(
        textwrap.dedent(
            f"""\
            import subprocess
            import tests.leftovers
            tests.leftovers.GRACE_SECONDS = 0.5

            def test_forgets_its_plugin():
                started = subprocess.Popen([{str(plugin)!r}, "600"], start_new_session=True)
                open({str(pid_file)!r}, "w").write(str(started.pid))
            """
        )
    )
    try:
        inner = subprocess.run(
            # Test ids relative to the test's own directory, wherever that is.
            [*INNER_PYTEST, "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    pid = pid_file.read_text()
    assert inner.returncode == 1, inner.stdout
    assert "1 passed" in inner.stdout
    named = (
        f"engine processes left behind by this session:\n  pulumi-resource (pid {pid}), "
        "started by test_inner.py::test_forgets_its_plugin (call)"
    )
    assert named in inner.stdout, inner.stdout
