"""No test leaves an engine process behind: every ``pulumi`` process (the CLI, a plugin, a
language host, a policy analyzer) started by this session must be gone when it ends.

``tests/conftest.py`` marks the session's environment (``MARK``), which every process the suite
starts inherits, the CLI's plugins included, and at the session's end looks for live processes
carrying the mark whose name starts with ``pulumi``, giving a run's teardown ``GRACE_SECONDS``
to end them. Each one left is named with the test that started it (its ``PYTEST_CURRENT_TEST``,
inherited too), and fails the session.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from infercrane_pulumi.automation.engine import marks
from infercrane_pulumi.automation.engine.marks import PROC

MARK = "INFERCRANE_TEST_SESSION"
GRACE_SECONDS = 10.0
ENGINE_NAME = "pulumi"  # /proc/<pid>/comm: pulumi, pulumi-resource, pulumi-language-, ...


def new_mark() -> str:
    return uuid.uuid4().hex


def engine_processes(mark: str) -> dict[int, str]:
    """Live ``pulumi*`` processes carrying ``mark``: pid -> what started them."""
    found = {}
    for pid in marks.marked(MARK, mark):
        try:
            name = (PROC / str(pid) / "comm").read_text().strip()
            started_by = _started_by(PROC / str(pid))
        except OSError:
            continue  # gone while we looked
        if name.startswith(ENGINE_NAME):
            found[pid] = f"{name} (pid {pid}), started by {started_by}"
    return found


def left_behind(mark: str, *, grace: float = GRACE_SECONDS) -> list[str]:
    """What is still running of ``mark``'s engine processes after ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while (found := engine_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return sorted(found.values())


def _started_by(entry: Path) -> str:
    """The test that started the process (the ``PYTEST_CURRENT_TEST`` it inherited)."""
    for item in (entry / "environ").read_bytes().split(b"\0"):
        name, _, value = item.partition(b"=")
        if name == b"PYTEST_CURRENT_TEST":
            return value.decode(errors="replace")
    return "(no test)"
