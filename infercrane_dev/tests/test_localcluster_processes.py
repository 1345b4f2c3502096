"""Process-group lifecycle of the local control plane's daemons (no Kubernetes binaries)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from infercrane_dev.localcluster.processes import (
    ManagedProcess,
    ProcessStartError,
    descendants,
    group_members,
    is_alive,
    start_process,
    stop_process,
    tail_log,
    wait_until_ready,
)


def _wait_for(predicate: object, timeout: float = 5.0) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _pids_in_log(log: Path, count: int) -> list[int]:
    # The shell scripts below print their children's pids, one per line.
    def ready() -> bool:
        return len([ln for ln in log.read_text().splitlines() if ln.isdigit()]) >= count

    _wait_for(ready)
    return [int(ln) for ln in log.read_text().splitlines() if ln.isdigit()]


def test_start_process_runs_in_own_group_and_logs_command(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "sleeper.log"
    proc = start_process("sleeper", ["sleep", "30"], log)
    try:
        assert proc.pgid == proc.pid
        assert os.getpgid(proc.pid) == proc.pid != os.getpgid(0)
        assert proc.is_running()
        assert proc.start_ticks is not None
        assert log.read_text().startswith("$ sleep 30")
    finally:
        stop_process(proc, grace=2)
    assert not proc.is_running()
    assert group_members(proc.pgid) == []


def test_stop_kills_whole_group_including_children(tmp_path: Path) -> None:
    log = tmp_path / "group.log"
    script = "sleep 60 & echo $!; sleep 60 & echo $!; wait"
    proc = start_process("group", ["sh", "-c", script], log)
    children = _pids_in_log(log, 2)
    assert all(is_alive(pid) for pid in children)
    assert sorted(group_members(proc.pgid)) == sorted([proc.pid, *children])

    stop_process(proc, grace=5)

    assert group_members(proc.pgid) == []
    assert not any(is_alive(pid) for pid in children)
    assert proc.returncode() is not None


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path: Path) -> None:
    log = tmp_path / "stubborn.log"
    # An ignored signal stays ignored across fork/exec, so the sleep child ignores TERM too.
    script = "trap '' TERM; sleep 60 & echo $!; while :; do sleep 0.1; done"
    proc = start_process("stubborn", ["sh", "-c", script], log)
    (child,) = _pids_in_log(log, 1)

    stop_process(proc, grace=0.5)  # a hang would hit the test's timeout

    assert group_members(proc.pgid) == []
    assert not is_alive(child)


def test_stop_is_idempotent(tmp_path: Path) -> None:
    proc = start_process("short", ["true"], tmp_path / "short.log")
    _wait_for(lambda: not proc.is_running())
    stop_process(proc)
    stop_process(proc)


def test_recorded_process_can_be_stopped_without_popen(tmp_path: Path) -> None:
    proc = start_process("sleeper", ["sleep", "30"], tmp_path / "s.log")
    record = proc.to_record()
    restored = ManagedProcess.from_record(record)
    assert restored.popen is None
    assert restored.is_running()

    stop_process(restored, grace=2)

    assert group_members(proc.pgid) == []
    assert not restored.is_running()
    proc.popen and proc.popen.wait(timeout=2)


def test_recycled_pid_is_left_alone(tmp_path: Path) -> None:
    proc = start_process("sleeper", ["sleep", "30"], tmp_path / "s.log")
    try:
        assert proc.start_ticks is not None
        impostor = ManagedProcess.from_record(
            {**proc.to_record(), "start_ticks": proc.start_ticks + 1}
        )
        assert impostor.leader_is_foreign()
        assert not impostor.is_running()

        stop_process(impostor, grace=0.5)

        assert proc.is_running(), "a pid with another start time must not be signalled"
    finally:
        stop_process(proc, grace=2)


def test_wait_until_ready_reports_early_exit_with_log_tail(tmp_path: Path) -> None:
    script = "echo starting; echo 'fatal: port already in use' >&2; exit 7"
    proc = start_process("crasher", ["sh", "-c", script], tmp_path / "crash.log")

    with pytest.raises(ProcessStartError) as info:
        wait_until_ready(proc, lambda: False, timeout=10, interval=0.05)

    message = str(info.value)
    assert "crasher exited (code 7)" in message
    assert "fatal: port already in use" in message
    assert str(tmp_path / "crash.log") in message


def test_wait_until_ready_times_out_with_last_probe_error(tmp_path: Path) -> None:
    proc = start_process("slow", ["sleep", "30"], tmp_path / "slow.log")
    try:

        def probe() -> bool:
            raise ConnectionRefusedError("nobody home")

        with pytest.raises(ProcessStartError, match=r"not ready after .*nobody home"):
            wait_until_ready(proc, probe, timeout=0.3, interval=0.05)
    finally:
        stop_process(proc, grace=2)


def test_wait_until_ready_returns_once_probe_succeeds(tmp_path: Path) -> None:
    proc = start_process("ok", ["sleep", "30"], tmp_path / "ok.log")
    calls = []
    try:

        def probe() -> bool:
            calls.append(1)
            return len(calls) >= 3

        waited = wait_until_ready(proc, probe, timeout=5, interval=0.01)
        assert waited >= 0
        assert len(calls) == 3
    finally:
        stop_process(proc, grace=2)


def test_tail_log(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("\n".join(f"line {i}" for i in range(100)) + "\n")
    assert tail_log(log, 3) == "line 97\nline 98\nline 99"
    assert tail_log(tmp_path / "missing.log") == ""


def test_python_child_inherits_no_stdin(tmp_path: Path) -> None:
    # Detached daemons must not hold the caller's terminal.
    code = "import sys; print(repr(sys.stdin.read()))"
    proc = start_process("stdin", [sys.executable, "-c", code], tmp_path / "stdin.log")
    _wait_for(lambda: not proc.is_running())
    assert "''" in (tmp_path / "stdin.log").read_text()


def test_descendants_follow_children_into_other_process_groups(tmp_path: Path) -> None:
    log = tmp_path / "tree.log"
    log.touch()
    # The grandchild moves to its own session, as Pulumi's plugins do.
    script = f"setsid sleep 30 & echo $! >> {log}; sleep 30 & echo $! >> {log}; wait"
    parent = subprocess.Popen(["sh", "-c", script])
    try:
        children = _pids_in_log(log, 2)
        _wait_for(lambda: set(children) <= descendants(parent.pid))
        assert not descendants(children[1])
    finally:
        for pid in [*descendants(parent.pid), parent.pid]:
            os.kill(pid, signal.SIGKILL)
        parent.wait()
    _wait_for(lambda: not any(is_alive(pid) for pid in children))
