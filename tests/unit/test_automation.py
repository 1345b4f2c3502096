"""The Automation API wrapper's own decisions: typed Pulumi failures, locks,
recovery, and no secret in any repr."""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto
from pulumi.automation._cmd import CommandResult

from infercrane_pulumi import automation, errors
from infercrane_pulumi.automation.engine import own_lock, stack_locks
from infercrane_pulumi.automation.stacks import pulumi_errors
from infercrane_pulumi.automation.state import holders
from infercrane_pulumi.automation.state.recovery import (
    break_fenced,
    break_locks,
    break_stale,
    recover,
)
from infercrane_pulumi.errors import (
    ConfigError,
    InferCraneError,
    RunFailedError,
    StackBusyError,
)

DEAD_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1  # no process can have it


def test_every_error_code_has_its_exit_code_and_only_retryable_ones_ask_for_a_retry() -> None:
    assert set(errors.EXIT_CODES) == set(errors.ERRORS)
    retry = {errors.EXIT_UNAVAILABLE, errors.EXIT_BUSY}
    for code, cls in errors.ERRORS.items():
        assert (errors.EXIT_CODES[code] in retry) == cls.retryable, code
    assert errors.EXIT_CODES[ConfigError.code] == errors.EXIT_INVALID


def _command_error(cls: type[auto.errors.CommandError], stderr: str) -> Exception:
    return cls(CommandResult(stdout="", stderr=stderr, code=255))


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (
            _command_error(
                auto.errors.ConcurrentUpdateError, "error: the stack is currently locked by 1 lock"
            ),
            StackBusyError,
        ),
        (_command_error(auto.errors.StackNotFoundError, "no stack named 'x' found"), ConfigError),
        # Another operation released its lock between the CLI's listing and its read (seen in
        # CI when two runners created one stack at once): busy a moment ago, retryable.
        (
            _command_error(
                auto.errors.CommandError,
                'error: could not create stack: blob (key ".pulumi/locks/organization/'
                'infercrane/s1/80ea.json") (code=NotFound): stat /state/.pulumi/locks/x',
            ),
            StackBusyError,
        ),
        (_command_error(auto.errors.CommandError, "error: boom"), RunFailedError),
        (auto.errors.InvalidVersionError("Pulumi CLI too old"), ConfigError),
        (FileNotFoundError("pulumi"), ConfigError),
    ],
    ids=["concurrent", "not-found", "vanished-lock", "command", "version", "no-cli"],
)
def test_every_pulumi_exception_becomes_a_typed_error(
    raised: Exception, expected: type[InferCraneError]
) -> None:
    def fail() -> None:
        with pulumi_errors("t1"):
            raise raised

    with pytest.raises(expected) as caught:
        fail()
    assert caught.value.__cause__ is raised


def test_a_failed_pulumi_command_says_the_cli_error_masked() -> None:
    raised = _command_error(
        auto.errors.CommandError,
        "warning: slow\nerror: first\nerror: blob (key x) https://ak:sk@s3.local failed",
    )
    with pytest.raises(RunFailedError) as caught, pulumi_errors("t1"):
        raise raised
    assert caught.value.problems == (
        "stack t1: pulumi command failed: blob (key x) https://***@s3.local failed",
    )


def test_the_environment_repr_hides_the_passphrase(tmp_path: Path) -> None:
    env = automation.PulumiEnvironment(
        state_dir=tmp_path, pulumi_home=tmp_path, passphrase="hunter2-passphrase"
    )
    assert "hunter2-passphrase" not in repr(env)


def test_environment_is_explicit_and_pins_plugins(tmp_path: Path) -> None:
    env = automation.PulumiEnvironment(
        state_dir=tmp_path / "state",
        pulumi_home=tmp_path / "home",
        passphrase="p",
        bin_dir=tmp_path / "bin",
        kubeconfig=tmp_path / "kubeconfig",
    )
    variables = env.variables()
    assert variables["PULUMI_BACKEND_URL"] == (tmp_path / "state").as_uri()
    assert variables["PULUMI_HOME"] == str(tmp_path / "home")
    assert variables["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert variables["PULUMI_IGNORE_AMBIENT_PLUGINS"] == "true"
    assert variables["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert variables["PULUMI_SKIP_CHECKPOINTS"] == "true"
    assert variables["PATH"].split(os.pathsep)[0] == str(tmp_path / "bin")
    # The run hands its kubeconfig to the program (``kubeconfigs``), never through a variable.
    assert "KUBECONFIG" not in variables


def test_any_diy_backend_url_passes_through_and_then_no_local_lock_is_read(
    tmp_path: Path,
) -> None:
    env = automation.PulumiEnvironment.for_backend(
        "s3://infercrane-state?region=eu-west-1",
        lease_url="postgres://u@db/leases",  # the proof it runs a stack alone (no lock read)
        pulumi_home=tmp_path,
        passphrase="p",
    )
    assert env.variables()["PULUMI_BACKEND_URL"] == "s3://infercrane-state?region=eu-west-1"
    assert env.local_state is None
    write_lock(tmp_path, "alive", os.getpid(), socket.gethostname())
    assert stack_locks(env.local_state, "t1") == []


def test_a_file_backend_url_keeps_its_directory_local(tmp_path: Path) -> None:
    env = automation.PulumiEnvironment.for_backend(
        (tmp_path / "my state").as_uri(), pulumi_home=tmp_path, passphrase="p"
    )
    assert env.local_state == tmp_path / "my state"
    assert env.variables()["PULUMI_BACKEND_URL"] == (tmp_path / "my state").as_uri()


def write_lock(state_dir: Path, name: str, pid: int, host: str) -> Path:
    lock_dir = state_dir / ".pulumi" / "locks" / "organization" / "infercrane" / "t1"
    lock_dir.mkdir(parents=True, exist_ok=True)
    path = lock_dir / f"{name}.json"
    path.write_text(json.dumps({"pid": pid, "hostname": host, "username": "root"}))
    # The file backend writes blob attributes beside each lock; they are not locks.
    path.with_name(path.name + ".attrs").write_text(json.dumps({"user.content-type": "json"}))
    return path


def test_only_locks_of_dead_processes_on_this_host_are_stale(tmp_path: Path) -> None:
    dead = write_lock(tmp_path, "dead", DEAD_PID, socket.gethostname())
    alive = write_lock(tmp_path, "alive", os.getpid(), socket.gethostname())
    remote = write_lock(tmp_path, "remote", DEAD_PID, "another-machine")
    locks = {lock.path: lock.stale for lock in stack_locks(tmp_path, "t1")}
    assert locks == {dead: True, alive: False, remote: False}
    assert stack_locks(tmp_path, "other-stack") == []


@pytest.mark.parametrize(
    ("where", "content"),
    [
        (("organization", "infercrane", "t1", "new.lock"), "{}"),  # another file name
        (("infercrane", "t1", "legacy.json"), "{}"),  # another depth
        (("organization", "infercrane", "t1", "garbled.json"), "{not json"),
        (("organization", "infercrane", "t1", "other.json"), '{"owner": "someone"}'),
    ],
    ids=["unknown name", "unknown depth", "unreadable", "no pid or hostname"],
)
def test_a_lock_layout_the_reader_does_not_know_holds_the_stack_fails_closed(
    tmp_path: Path, where: tuple[str, ...], content: str
) -> None:
    """Pulumi's lock layout is private: whatever is in the locks directory that the reader does
    not know is a holder it cannot name, and the stack is busy (retryable), never free."""
    path = tmp_path.joinpath(".pulumi", "locks", *where)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    env = automation.PulumiEnvironment(state_dir=tmp_path, pulumi_home=tmp_path, passphrase="p")
    [lock] = stack_locks(tmp_path, "t1")
    assert (lock.path, lock.pid, lock.stale) == (path, None, False)
    with pytest.raises(StackBusyError) as busy:
        holders.wait_until_free(env, "t1", 0)
    assert busy.value.retryable
    assert busy.value.problems == (
        f"stack t1: its lock is held by an unknown holder ({path.name}: not a lock this "
        "reader knows)",
    )


def test_a_locks_directory_that_cannot_be_listed_holds_every_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing skipped such a directory, and the stack read as free: a verified no-op could
    answer, and a destroy delete, while another process held it. (As root, permissions deny
    nothing: the listing itself fails here.)"""
    hidden = tmp_path / ".pulumi" / "locks" / "organization" / "infercrane"
    hidden.mkdir(parents=True)
    scandir = os.scandir

    def refusing(path: Any) -> Any:
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    [lock] = stack_locks(tmp_path, "t1")
    assert (lock.path, lock.pid, lock.stale) == (hidden, None, False)
    env = automation.PulumiEnvironment(state_dir=tmp_path, pulumi_home=tmp_path, passphrase="p")
    with pytest.raises(StackBusyError):
        holders.wait_until_free(env, "t1", 0)
    monkeypatch.undo()
    assert stack_locks(tmp_path, "t1") == []  # readable, and empty: free


def test_locks_of_another_project_and_a_lock_s_blob_attributes_hold_nothing(
    tmp_path: Path,
) -> None:
    theirs = tmp_path / ".pulumi" / "locks" / "organization" / "theirs" / "t1" / "x.json"
    theirs.parent.mkdir(parents=True)
    theirs.write_text(json.dumps({"pid": os.getpid(), "hostname": socket.gethostname()}))
    assert stack_locks(tmp_path, "t1") == []
    ours = write_lock(tmp_path, "ours", os.getpid(), socket.gethostname())  # with its .attrs
    assert [lock.path for lock in stack_locks(tmp_path, "t1")] == [ours]


def test_the_lock_of_a_process_that_died_but_is_not_yet_reaped_is_stale(tmp_path: Path) -> None:
    """A killed holder stays a zombie until its parent reaps it; it runs nothing any more."""
    child = subprocess.Popen(["true"])
    try:
        stat = Path(f"/proc/{child.pid}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        zombie = write_lock(tmp_path, "zombie", child.pid, socket.gethostname())
        assert {lock.path: lock.stale for lock in stack_locks(tmp_path, "t1")} == {zombie: True}
    finally:
        child.wait()


PENDING = [{"type": "creating", "resource": {"urn": "urn:pulumi:t1::infercrane::x::y"}}]


def write_checkpoint(state_dir: Path, pending: list[Any], *, suffix: str = ".json") -> Path:
    """A file backend's checkpoint of stack t1 (with its blob attributes) holding ``pending``."""
    path = state_dir / ".pulumi" / "stacks" / "infercrane" / f"t1{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    latest = {"manifest": {"version": "v3.274.0"}, "resources": [], "pending_operations": pending}
    path.write_text(json.dumps({"version": 3, "checkpoint": {"stack": "t1", "latest": latest}}))
    path.with_name(path.name + ".attrs").write_text(json.dumps({"md5": "the old bytes'"}))
    return path


def pending_of(checkpoint: Path) -> Any:
    return json.loads(checkpoint.read_text())["checkpoint"]["latest"]["pending_operations"]


def files_under(state_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(state_dir)) for p in state_dir.rglob("*") if p.is_file())


@pytest.mark.parametrize(
    ("locks", "broken"),
    [
        ([], False),
        ([("alive", os.getpid(), "here")], False),
        ([("dead", DEAD_PID, "here"), ("alive", os.getpid(), "here")], False),
        ([("remote", DEAD_PID, "another-machine")], False),
        ([("dead", DEAD_PID, "here"), ("dead2", DEAD_PID, "here")], True),
    ],
    ids=["no-lock", "live-lock", "dead-and-live", "remote-lock", "stale-locks"],
)
def test_recovery_breaks_locks_and_clears_interrupted_operations_only_when_all_are_stale(
    tmp_path: Path, locks: list[tuple[str, int, str]], broken: bool
) -> None:
    for name, pid, host in locks:
        write_lock(tmp_path, name, pid, socket.gethostname() if host == "here" else host)
    checkpoint = write_checkpoint(tmp_path, PENDING)
    before = files_under(tmp_path)
    env = automation.PulumiEnvironment(state_dir=tmp_path, pulumi_home=tmp_path, passphrase="p")
    done = recover(env, "t1")
    if not broken:
        assert (done, files_under(tmp_path), pending_of(checkpoint)) == ([], before, PENDING)
        return
    assert done == [
        "broke 2 stale lock(s) of dead process(es)",
        "cleared 1 interrupted operation(s); the next run re-applies",
    ]
    assert pending_of(checkpoint) == []
    # The locks and their attributes gone, ours too; the checkpoint's attributes described
    # the bytes before (the blob driver serves a file without them alike).
    assert files_under(tmp_path) == [".pulumi/stacks/infercrane/t1.json"]


def test_a_lock_taken_after_the_staleness_check_survives_the_break_and_keeps_the_state(
    tmp_path: Path,
) -> None:
    """What ``pulumi cancel`` would delete too: a holder that came between the look and the
    break (another driver that recovered first and runs now) keeps its lock and its state."""
    dead = write_lock(tmp_path, "dead", DEAD_PID, socket.gethostname())
    checkpoint = write_checkpoint(tmp_path, PENDING)
    read = stack_locks(tmp_path, "t1")
    assert [lock.stale for lock in read] == [True]
    alive = write_lock(tmp_path, "alive", os.getpid(), socket.gethostname())
    done = break_stale(tmp_path, "t1", read)
    assert done == [
        "broke 1 stale lock(s) of dead process(es)",
        f"left the state to process {os.getpid()} on {socket.gethostname()}, which took the "
        "stack since",
    ]
    assert [lock.path for lock in stack_locks(tmp_path, "t1")] == [alive]
    assert not dead.exists() and not dead.with_name(dead.name + ".attrs").exists()
    assert pending_of(checkpoint) == PENDING


def test_while_recovery_holds_the_stack_its_lock_is_one_in_the_clis_layout(
    tmp_path: Path,
) -> None:
    with own_lock(tmp_path, "t1") as ours:
        [lock] = stack_locks(tmp_path, "t1")
        assert (lock.path, lock.pid, lock.hostname, lock.stale) == (
            ours,
            os.getpid(),
            socket.gethostname(),
            False,
        )
        content = json.loads(ours.read_text())
        assert set(content) == {"pid", "username", "hostname", "timestamp"}
        # What the CLI's Go decoder takes: RFC 3339 with a zone.
        assert datetime.datetime.fromisoformat(content["timestamp"]).tzinfo is not None
        assert ours.parent == tmp_path / ".pulumi" / "locks" / "organization" / "infercrane" / "t1"
        assert files_under(tmp_path) == [str(ours.relative_to(tmp_path))]  # nothing staged left
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("torn", ["", '{"md5": '], ids=["empty", "cut short"])
def test_recovery_removes_the_checkpoint_attributes_a_killed_write_left_torn(
    tmp_path: Path, torn: str
) -> None:
    """A run killed while the engine wrote the state (found by the deletion rule's property
    test): the blob driver had written its attributes file only in part, and every later CLI
    failed to load the checkpoint (EOF). Recovery removes them; whole ones it leaves."""
    write_lock(tmp_path, "dead", DEAD_PID, socket.gethostname())
    checkpoint = write_checkpoint(tmp_path, [])
    attributes = checkpoint.with_name(checkpoint.name + ".attrs")
    attributes.write_text(torn)
    env = automation.PulumiEnvironment(state_dir=tmp_path, pulumi_home=tmp_path, passphrase="p")
    assert recover(env, "t1") == [
        "broke 1 stale lock(s) of dead process(es)",
        "removed the checkpoint's attributes a killed write left torn",
    ]
    assert files_under(tmp_path) == [".pulumi/stacks/infercrane/t1.json"]
    write_lock(tmp_path, "dead", DEAD_PID, socket.gethostname())
    write_checkpoint(tmp_path, [])  # whole attributes: kept
    assert recover(env, "t1") == ["broke 1 stale lock(s) of dead process(es)"]
    assert attributes.exists()


def test_a_checkpoint_in_a_form_recovery_does_not_know_keeps_its_operations(
    tmp_path: Path,
) -> None:
    write_lock(tmp_path, "dead", DEAD_PID, socket.gethostname())
    write_checkpoint(tmp_path, PENDING)
    compressed = write_checkpoint(tmp_path, PENDING, suffix=".json.gz")  # both forms: unknown
    before = compressed.read_bytes()
    env = automation.PulumiEnvironment(state_dir=tmp_path, pulumi_home=tmp_path, passphrase="p")
    assert recover(env, "t1") == [
        "broke 1 stale lock(s) of dead process(es)",
        "left any interrupted operations: a checkpoint form this reader does not know",
    ]
    assert compressed.read_bytes() == before
    assert stack_locks(tmp_path, "t1") == []


class _RecordingStack:
    """The parts of ``auto.Stack`` a break under a lease touches, recording what it was asked."""

    name = "t1"

    def __init__(self, pending: list[Any]) -> None:
        self.calls: list[str] = []
        self.deployment = {"resources": [], "pending_operations": pending}

    def cancel(self) -> None:
        self.calls.append("cancel")

    def export_stack(self) -> auto.Deployment:
        self.calls.append("export")
        return auto.Deployment(version=3, deployment=dict(self.deployment))

    def import_stack(self, state: auto.Deployment) -> None:
        self.calls.append("import")
        self.deployment = dict(state.deployment or {})


@pytest.mark.parametrize("pending", [PENDING, []], ids=["pending", "none"])
def test_under_a_lease_every_lock_is_cancelled_and_interrupted_operations_cleared(
    pending: list[Any],
) -> None:
    stack = _RecordingStack(pending)
    done = break_locks(stack, "the lock of a replica that no longer holds the lease")  # type: ignore[arg-type]
    assert stack.calls == ["cancel", "export"] + (["import"] if pending else [])
    assert stack.deployment["pending_operations"] == []
    assert done[0] == "cancelled the lock of a replica that no longer holds the lease"


def test_under_a_lease_only_locks_a_lease_holders_engine_left_are_broken(tmp_path: Path) -> None:
    """A person's run takes no lease: its live lock was broken under it. Read one by one from
    the backend's own store, a lock is deleted only when its holder is gone from this host or is
    an engine a lease holder started (the fence stopped it); any other makes the stack busy and
    is left as it was."""
    env = automation.PulumiEnvironment(state_dir=tmp_path, pulumi_home=tmp_path, passphrase="p")
    fenced = write_lock(tmp_path, "fenced", 777, "runner-pod-b")
    dead = write_lock(tmp_path, "dead", DEAD_PID, socket.gethostname())
    engines = frozenset({("runner-pod-b", 777)})
    stack = _RecordingStack(PENDING)
    done = break_fenced(env, stack, engines)  # type: ignore[arg-type]
    assert done == [
        "deleted 2 lock(s) of fenced engines",
        "cleared 1 interrupted operation(s); the next run re-applies",
    ]
    assert (fenced.exists(), dead.exists(), stack.calls) == (False, False, ["export", "import"])

    for name, pid, host in (
        ("person", 4242, "a-laptop"),  # another host's, no lease holder's engine
        ("here", os.getpid(), socket.gethostname()),  # this host's, alive
    ):
        live = write_lock(tmp_path, name, pid, host)
        stack = _RecordingStack(PENDING)
        with pytest.raises(StackBusyError) as busy:
            break_fenced(env, stack, engines | {(host, 1)})  # type: ignore[arg-type]
        assert busy.value.problems == (
            f"stack t1: its lock is held by process {pid} on {host}, which no lease holder "
            "started (a person's pulumi run?); it is never broken: retry once it has ended",
        )
        assert (live.exists(), stack.calls) == (True, [])
        live.unlink()
