"""The Pulumi CLI's private behaviours the run path relies on, on each CLI of the promised range
(``ENGINE_CLIS``: the pinned one, 3.274.0, also the oldest of the range the Go module proxy
builds here, and the newest it serves, 3.276.0).

Only here (rows of docs/reference/engine-contracts.md), through the public doors
(``NamespaceStack``, the stack file's run, the JSON CLI, ``stack_locks``): a verified no-op read
from the checkpoint file the CLI wrote, with no CLI process at all (10); the ``same`` steps of
the keys a run carries recognized by their first bytes, none decoded (4); an unwatched run's
display streamed one engine event a line (6); a stack held by a live ``pulumi`` found in the lock
file it wrote (busy, and retryable) and the lock a SIGKILLed one left recovered (7, 9), under
recovery's own lock, which the CLI respects, leaving a lock taken after its look and clearing
the checkpoint's interrupted operations as the CLI then reads them (9, 10); a
configuration too large for the environment read by a person's program from our host's file (11,
on the pinned CLI: the host is ours whichever CLI starts it); a run
whose driver is interrupted or terminated ends with its engine, and the next run goes on. The
others run on both CLIs where they are tested already (``ENGINE_CLIS`` there): the served program
with its events per key (``test_control_plane``), the JSON CLI's progress lines in the engine's
order (``test_cli_and_faults``), the killed ``pulumi up`` (``test_lifecycle``), the policy pack's
refusal (``test_policy_pack``) and the kubeconfig contents stored from stdin
(``test_kubeconfig_contents``).

``make test-pythons`` runs this module's pinned-CLI cases on its Pythons too (``pythons``), one
of them with the lowest Pulumi SDK the package allows: the served program's runtime is made of
the SDK's public runtime, and these are the behaviours that runtime meets the engine in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pulumi import automation as auto

from infercrane_dev.localcluster.processes import descendants, is_alive
from infercrane_pulumi.automation import project, stack_locks, targets
from infercrane_pulumi.automation.engine import Lock, own_lock
from infercrane_pulumi.automation.engine.events import known_same_step
from infercrane_pulumi.automation.state import recovery
from infercrane_pulumi.errors import StackBusyError
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.harness import ENGINE_CLIS, Harness, intent, replica, show, wait_for
from tests.conformance.test_cli_and_faults import cli, finished
from tests.conformance.test_exact_deletion import by_hand
from tests.runguard import by_a_person
from tests.spies import spy

pytestmark = [pytest.mark.conformance, pytest.mark.pythons]
# What a call of the CLI is for: its first two words that are not flags.
ENGINE_OPERATIONS = {"up", "preview", "destroy", "refresh"}
STATE_READS = {("stack", "output"), ("stack", "export")}
DEPLOYMENT_TYPE = "kubernetes:apps/v1:Deployment"  # its resource type in the state


def recording_cli(harness: Harness, directory: Path) -> tuple[Harness, Path]:
    """``harness`` with a ``pulumi`` that appends each call's arguments to ``directory/calls``
    (one line a call), then runs the harness's; an unwatched engine run's display (its first
    argument ``--non-interactive``, its last ``--json``: ``process.run`` writes it as the
    run's event log) is copied to ``directory/displays/<pid>-<verb>`` too."""
    assert harness.env.bin_dir is not None
    wrapper = directory / "bin"
    wrapper.mkdir(parents=True)
    (directory / "displays").mkdir()
    calls = directory / "calls"
    calls.touch()
    here, real = shlex.quote(str(directory)), shlex.quote(str(harness.env.bin_dir / "pulumi"))
    (wrapper / "pulumi").write_text(
        "#!/bin/bash\n"
        f'printf "%s\\n" "$*" >>{here}/calls\n'
        "for last; do :; done\n"
        'if [ "$1" = --non-interactive ] && [ "$last" = --json ]; then\n'
        f'    {real} "$@" | tee {here}/displays/$$-"$2"\n'
        '    exit "${PIPESTATUS[0]}"\n'
        "fi\n"
        f'exec {real} "$@"\n'
    )
    (wrapper / "pulumi").chmod(0o755)
    recorded = dataclasses.replace(harness.env, bin_dir=wrapper)
    return dataclasses.replace(harness, env=recorded), calls


def reads_or_runs(call: str) -> bool:
    """Whether a recorded CLI call ran the engine or read the stack's state."""
    verbs = tuple(word for word in call.split() if not word.startswith("-"))[:2]
    return verbs[:1] in {(verb,) for verb in ENGINE_OPERATIONS} or verbs in STATE_READS


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_a_noop_is_read_from_the_checkpoint_the_cli_wrote_and_starts_no_cli(
    harness: Harness, tmp_path: Path
) -> None:
    recorded, calls = recording_cli(harness, tmp_path / "recorded")
    stack = recorded.namespace_stack(tmp_path / "workspace")
    events: list[auto.EngineEvent] = []
    stack.on_event = events.append
    created = stack.ensure([intent("noop-a")])
    assert [(r.external_key, r.change) for r in created.replicas] == [("noop-a", "create")]
    assert events, "the engine's events of the first run"
    assert any(map(reads_or_runs, calls.read_text().splitlines())), "the recording CLI ran it"

    events.clear()
    before = calls.read_text()
    again = stack.ensure([intent("noop-a")])
    assert [(r.external_key, r.change) for r in again.replicas] == [("noop-a", "same")]
    assert again.verified_unchanged
    assert events == []  # the engine did not run
    # What the stack applied came from the checkpoint file this CLI wrote: a layout the driver
    # did not recognize would have been asked of the CLI (`stack output`).
    assert [c for c in calls.read_text()[len(before) :].splitlines() if reads_or_runs(c)] == []
    stack.destroy()


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_a_served_run_s_resources_are_kept_without_a_stack_trace(
    harness: Harness, tmp_path: Path
) -> None:
    """Row 13: a resource registered with an empty stack trace (``serving``) is kept in the
    checkpoint with none, nor a source position: 7.4 KB less state per intent."""
    stack = harness.namespace_stack(tmp_path / "workspace")
    stack.ensure([intent("trace-a")])
    assert harness.env.state_dir is not None
    [path] = harness.env.state_dir.rglob(f".pulumi/stacks/*/{harness.stack_name}.json")
    resources = json.loads(path.read_text())["checkpoint"]["latest"]["resources"]
    kept = {(r["type"], k) for r in resources for k in ("stackTrace", "sourcePosition") if k in r}
    # The stack's own resource is registered by the SDK before the program runs: one trace.
    assert {kind for kind, _ in kept} <= {"pulumi:pulumi:Stack"}
    assert {r["type"] for r in resources} >= {DEPLOYMENT_TYPE, "kubernetes:core/v1:Service"}
    stack.destroy()


def same_step_urn(line: str) -> str | None:
    """The URN of the ``same`` step an event-log line reports, read in full (None: another
    event)."""
    event = json.loads(line)
    for kind in ("resourcePreEvent", "resOutputsEvent"):
        metadata = event.get(kind, {}).get("metadata", {})
        if metadata.get("op") == "same":
            return str(metadata["urn"])
    return None


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_the_same_steps_of_carried_keys_are_recognized_without_being_decoded(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row 4: the engine writes a ``same`` step's line in Go's field order, which the event
    reader recognizes by its first bytes. Were the order another, every line would be decoded
    (slower, the results the same): this fails instead."""
    stack = harness.namespace_stack(tmp_path / "workspace")
    stack.ensure([intent("fast-a"), intent("fast-b")])
    looked = spy(monkeypatch, known_same_step)
    added = stack.ensure([intent("fast-a"), intent("fast-b"), intent("fast-c")])
    assert [(r.external_key, r.change) for r in added.replicas] == [
        ("fast-a", "same"),
        ("fast-b", "same"),
        ("fast-c", "create"),
    ]
    # The carried keys' URNs (a's and b's: the run targets c alone) are the ones left unread.
    [unread] = {call.args[1] for call in looked}
    carried = targets.owners(
        project=project.PROJECT_NAME,
        stack=harness.stack_name,
        settings=stack.settings,
        keys=["fast-a", "fast-b"],
    )
    assert unread == frozenset(carried)
    # Each of their `same` steps recognized by the fast reader, none decoded.
    recognized = {(same_step_urn(call.args[0]), call.result) for call in looked}
    assert {(urn, seen) for urn, seen in recognized if urn in unread} == {
        (urn, True) for urn in unread
    }
    stack.destroy()


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_an_unwatched_run_s_display_streams_one_engine_event_a_line(
    harness: Harness, tmp_path: Path
) -> None:
    """Row 6: with nobody watching, ``process.run`` asks the CLI for its JSON display (``preview``
    with ``PULUMI_ENABLE_STREAMING_JSON_PREVIEW=true``), which streams each engine event on a
    line of its own and keeps none, and writes it as the run's event log, asking for no other
    (the CLI encodes each event once). A CLI that printed one document at the end, holding every
    step until then (``preview --json`` without the variable), fails here. What that saves in
    memory is measured in benchmarks/results/history-until-2026-12.md, not here."""
    recorded, calls = recording_cli(harness, tmp_path / "recorded")
    stack = recorded.namespace_stack(tmp_path / "workspace")
    stack.preview([intent("json-a")])
    stack.ensure([intent("json-a")])
    displays = {
        path.name.split("-", 1)[1]: path.read_text().splitlines()
        for path in (calls.parent / "displays").iterdir()
    }
    assert sorted(displays) == ["preview", "up"]
    for verb, lines in displays.items():
        shown = [json.loads(line) for line in lines]  # each line a document of its own
        # Every engine event in order, one a line, to the engine's last two.
        assert [event["sequence"] for event in shown] == list(range(len(shown))), verb
        kinds = [set(event) - {"sequence", "timestamp"} for event in shown]
        # To the engine's summary and its cancel event, the last. Between them only
        # diagnostics: the engine still reports what reaches it after the summary (seen once,
        # in a cold CI run with the Kind tests beside it: one diagnostic event there).
        summary = kinds.index({"summaryEvent"})
        after = kinds[summary + 1 :]
        assert after[-1:] == [{"cancelEvent"}], (verb, shown[summary:])
        assert all(kind == {"diagnosticEvent"} for kind in after[:-1]), (verb, shown[summary:])
    assert [call for call in calls.read_text().splitlines() if "--event-log" in call] == []
    stack.destroy()


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_a_stack_a_live_cli_holds_is_busy_and_the_lock_of_a_killed_one_is_recovered(
    harness: Harness, tmp_path: Path
) -> None:
    harness.configure([replica("held-a")])
    harness.stack()  # created, as a person's `pulumi stack init` would
    with held_by_a_person(harness, tmp_path / "holder") as (holder, lock):
        assert (lock.pid, lock.stale) == (holder.pid, False)
        with pytest.raises(StackBusyError) as busy:
            harness.up()
        assert (busy.value.code, busy.value.retryable) == ("stack-busy", True)
        assert busy.value.problems == (
            f"stack {harness.stack_name}: its lock is held by process {holder.pid}"
            f" on {socket.gethostname()}",
        )
        # A run that took its look just before the holder started meets the CLI's own refusal,
        # told apart by the SDK from its text (the run path's race: busy, not failed).
        refused = by_hand(harness, tmp_path, "up", "--yes", on_event=lambda _: None, check=False)
        said = auto.CommandResult(refused.stdout, refused.stderr, refused.returncode)
        assert isinstance(auto.errors.create_command_error(said), auto.errors.ConcurrentUpdateError)
    # Left behind by a CLI that cannot release it any more: the retry breaks it and goes on.
    assert [left.stale for left in stack_locks(harness.env.state_dir, harness.stack_name)] == [True]
    result = harness.up()
    assert [(r.external_key, r.change) for r in result.replicas] == [("held-a", "create")]
    assert stack_locks(harness.env.state_dir, harness.stack_name) == []
    harness.destroy()


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_a_stale_lock_is_broken_alone_under_a_lock_the_cli_respects_and_the_stack_runs_after(
    harness: Harness, tmp_path: Path
) -> None:
    """Rows 9 and 10 written: recovery's own lock keeps a CLI off the stack; it deletes exactly
    the stale lock it read, never one a live process took after that look (``pulumi cancel``
    deleted both); the interrupted operations it clears from the checkpoint are gone for the
    CLI too; and the stack runs after."""
    state_dir = harness.env.state_dir
    assert state_dir is not None
    harness.configure([replica("broken-a")])
    harness.up()
    # An operation interrupted mid-step, as a CLI stopped by a signal records it (written into
    # the checkpoint here: `pulumi stack import` drops interrupted operations), which the CLI
    # reads.
    checkpoint = state_dir / ".pulumi" / "stacks" / project.PROJECT_NAME / harness.stack_name
    checkpoint = checkpoint.with_suffix(".json")
    content = json.loads(checkpoint.read_text())
    deployment = content["checkpoint"]["latest"]
    [created] = [r for r in deployment["resources"] if r["type"] == DEPLOYMENT_TYPE]
    deployment["pending_operations"] = [{"resource": created, "type": "creating"}]
    checkpoint.write_text(json.dumps(content))
    before = harness.stack().export_stack().deployment or {}
    assert [op["type"] for op in before["pending_operations"]] == ["creating"]

    # Recovery's own lock, alone on the stack, keeps a person's CLI off it, naming us.
    with own_lock(state_dir, harness.stack_name):
        refused = by_hand(harness, tmp_path, "up", "--yes", on_event=lambda _: None, check=False)
    said = auto.CommandResult(refused.stdout, refused.stderr, refused.returncode)
    assert isinstance(auto.errors.create_command_error(said), auto.errors.ConcurrentUpdateError)
    assert f"(pid {os.getpid()})" in refused.stderr

    with held_by_a_person(harness, tmp_path / "dead") as (_, dead):
        pass  # SIGKILLed: its lock stays
    read = stack_locks(state_dir, harness.stack_name)  # recovery's look
    assert [(lock.path, lock.stale) for lock in read] == [(dead.path, True)]

    # A live process takes the stack after the look. Its CLI refuses while any lock is there,
    # so the stale one is set aside for that moment and put back.
    beside = [dead.path, dead.path.with_name(dead.path.name + ".attrs")]
    assert all(path.exists() for path in beside)  # the blob driver's attributes too
    for path in beside:
        path.rename(tmp_path / path.name)
    with held_by_a_person(harness, tmp_path / "live") as (live, taken):
        for path in beside:
            (tmp_path / path.name).rename(path)
        done = recovery.break_stale(state_dir, harness.stack_name, read)
        assert done == [
            "broke 1 stale lock(s) of dead process(es)",
            f"left the state to process {live.pid} on {socket.gethostname()}, which took the "
            "stack since",
        ]
        assert stack_locks(state_dir, harness.stack_name) == [taken]
        assert live.poll() is None
        assert not any(path.exists() for path in beside)
    # Its holder killed too, the next run breaks that lock alone and clears the operation.
    [left] = stack_locks(state_dir, harness.stack_name)
    assert (left.path, left.stale) == (taken.path, True)
    assert recovery.recover(harness.env, harness.stack_name) == [
        "broke 1 stale lock(s) of dead process(es)",
        "cleared 1 interrupted operation(s); the next run re-applies",
    ]
    # The CLI reads the checkpoint as recovery left it.
    after = harness.stack().export_stack().deployment or {}
    assert after.get("pending_operations") in (None, [])
    assert [r["urn"] for r in after["resources"]] == [r["urn"] for r in deployment["resources"]]
    harness.configure([replica("broken-a"), replica("broken-b")])
    result = harness.up()
    assert [(r.external_key, r.change) for r in result.replicas] == [
        ("broken-a", "same"),
        ("broken-b", "create"),
    ]
    assert stack_locks(state_dir, harness.stack_name) == []
    harness.destroy()


@contextlib.contextmanager
def held_by_a_person(
    harness: Harness, directory: Path
) -> Iterator[tuple[subprocess.Popen[bytes], Lock]]:
    """A person's ``pulumi up`` whose program never finishes, holding the stack's lock: its
    process and its lock, read where the run path looks, once its program runs (the CLI took
    the lock for good: it looks for other locks only before). SIGKILLed with its process group
    at the end with the plugins it started, so that its lock stays, as a dead run's does."""
    project_dir = harness.by_hand_project(directory)
    running = directory / "running"
    (project_dir / "__main__.py").write_text(
        f"import pathlib, time\n\npathlib.Path({str(running)!r}).touch()\ntime.sleep(600)\n"
    )
    holder: subprocess.Popen[bytes] = by_a_person(
        subprocess.Popen,
        [
            "pulumi",
            "up",
            "--yes",
            "--skip-preview",
            "--non-interactive",
            "--stack",
            harness.stack_name,
        ],
        cwd=project_dir,
        env=harness.process_env() | harness.env.variables(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(running.exists, timeout=120, what="the holder's program to run")
        [lock] = [
            lock
            for lock in stack_locks(harness.env.state_dir, harness.stack_name)
            if lock.pid == holder.pid
        ]
        yield holder, lock
    finally:
        # As its host dies: the CLI's group, and the plugins it started, each of which Pulumi
        # puts in a process group of its own (they outlived the suite otherwise).
        plugins = descendants(holder.pid)
        os.killpg(holder.pid, signal.SIGKILL)
        for pid in plugins:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        holder.wait(timeout=30)


# A person's program that reads its configuration as InferCrane's does, and says what it read
# and whether Pulumi's own variable held it too.
CONFIGURATION_READER = """\
import json, os, pathlib
from infercrane_pulumi.program import program
program.load_host_config()
config = program.config_from_pulumi()
pathlib.Path(os.environ["SEEN"]).write_text(json.dumps({
    "in PULUMI_CONFIG": "PULUMI_CONFIG" in os.environ,
    "keys": [replica.external_key for replica in config.replicas],
}))
"""


def test_a_configuration_past_the_environment_s_limit_reaches_a_person_s_program(
    harness: Harness, tmp_path: Path
) -> None:
    """Row 11: our language host hands a person's program a configuration too large for one
    environment string (past its 64 KiB) in the file ``INFERCRANE_PULUMI_CONFIG_FILE`` names,
    and the program reads it from there."""
    keys = [f"large-{i:04}" for i in range(800)]
    harness.configure([replica(key) for key in keys])
    assert len(json.dumps([replica(key) for key in keys])) > 64 * 1024
    harness.stack()  # created, as a person would have with `pulumi stack init`
    project = harness.by_hand_project(tmp_path / "by-hand")
    (project / "__main__.py").write_text(CONFIGURATION_READER)
    seen = tmp_path / "seen.json"
    done = by_a_person(
        subprocess.run,
        ["pulumi", "preview", "--stack", harness.stack_name, "--non-interactive"],
        cwd=project,
        env=harness.process_env() | harness.env.variables() | {"SEEN": str(seen)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert json.loads(seen.read_text()) == {"in PULUMI_CONFIG": False, "keys": keys}


@pytest.mark.parametrize("interrupt", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_a_run_whose_driver_is_stopped_ends_with_its_engine_and_the_next_run_goes_on(
    harness: Harness, interrupt: signal.Signals, pytestconfig: pytest.Config
) -> None:
    # Enough keys that the run is still writing when its first object shows.
    keys = [f"stopped-{i}" for i in range(16)]
    harness.configure([replica(key) for key in keys])
    with interruptible():
        running = cli(harness, "up")
    started: set[int] = set()  # the run's CLI and plugins

    def first_object() -> bool:
        # Read before the objects: a process seen here ran while the run was writing.
        started.update(descendants(running.pid))
        return bool(harness.owned(kinds.DEPLOYMENT) or harness.owned(kinds.SERVICE))

    wait_for(first_object, timeout=120, what="the first object of the run")
    written = len(harness.owned(kinds.DEPLOYMENT))
    stopped = time.monotonic()
    running.send_signal(interrupt)
    _, err = running.communicate(timeout=60)
    # SIGINT is the driver's KeyboardInterrupt (exit 130, no envelope); SIGTERM ends it.
    assert running.returncode == (130 if interrupt == signal.SIGINT else -signal.SIGTERM), err
    assert started
    wait_for(
        lambda: not any(is_alive(pid) for pid in started),
        timeout=60,
        what="the stopped run's CLI and plugins to end on their own",
    )
    ended = time.monotonic() - stopped
    # Not required (the next run breaks a lock its dead holder left), but worth seeing.
    left = len(stack_locks(harness.env.state_dir, harness.stack_name))
    show(
        pytestconfig,
        f"{version(harness)}, driver stopped by {interrupt.name} with {written}/{len(keys)} "
        f"Deployments written: its engine ended {ended:.2f}s later, {left} lock(s) left",
    )
    code, envelope, _ = finished(cli(harness, "up"))
    assert code == 0, envelope
    assert {r["change"] for r in envelope["result"]["replicas"]} <= {"create", "update", "same"}
    for kind in (kinds.DEPLOYMENT, kinds.SERVICE):
        names = sorted(o["metadata"]["name"] for o in harness.owned(kind))
        assert names == sorted(naming.object_name(key) for key in keys)  # each exactly once
    assert stack_locks(harness.env.state_dir, harness.stack_name) == []


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Processes started inside take SIGINT as a person's shell gives it, even when this suite
    runs with SIGINT ignored (a non-interactive shell's background job: Python then never raises
    KeyboardInterrupt, and a driver sent SIGINT finished its run, exit 0, on Kind 1.34). An
    ignored signal stays ignored across exec; one this process handles is reset to the default."""
    before = signal.getsignal(signal.SIGINT)
    if before is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def version(harness: Harness) -> str:
    """What the harness's CLI says it is."""
    assert harness.env.bin_dir is not None
    said = subprocess.run(
        [harness.env.bin_dir / "pulumi", "version"],
        env=harness.env.variables(),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return f"pulumi {said.stdout.strip()}"
