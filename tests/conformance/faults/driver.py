"""The killed driver and the replica after it: ``tests.conformance.replica`` with three more
calls, and a kill at a point of the engine's event log.

``python -m tests.conformance.faults.driver <spec.json>`` is the conformance replica process
(its spec, its own workspace and PULUMI_HOME on a shared backend, one JSON call per line on
stdin), answering four more calls: ``apply`` (``ensure``, answering also whether the run was
a verified no-op), ``remove`` (one key), ``destroy`` and ``export`` (the stack's state through
the Automation API: its pending operations, the Kubernetes objects it records).

``Driver`` is the test's side. Each run of the run path writes the engine's event log in a
private directory under the process's TMPDIR (``automation.run._attempt``); the driver's TMPDIR
is a directory of the test, so ``kill_at`` follows that log as the engine writes it and, at a
``Point``, SIGKILLs the driver's process group and every process group below it (the engine
starts its provider in a group of its own; the program is served from the driver's process):
``kill_tree``. Reading the log trails the engine: a run that ends within a second can be over
before its point is read (seen under load, on Kind and here). Points after the engine's first
write are therefore held, not chased, by the driver itself (``apply``'s ``hold``):
``after-apply``, the program, served from the driver, never finishes once the first object of
the run's last key has been applied (created or updated), so the engine, which writes the
state only after the program, waits there; ``before-deletes``, the run path stops after the
engine has written the state and before it deletes the objects of removed keys. The checkpoint
itself is replaced atomically on every backend, so the two bracket a kill during its write; on
the file backend the blob driver's attributes beside it are not (a kill there leaves them torn,
which recovery repairs: ``test_lifecycle``'s torn checkpoint, and the property test's kills).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pulumi import automation as auto

from infercrane_dev.localcluster.processes import kill_tree, process_start_ticks
from infercrane_pulumi.automation import NamespaceStack, engine
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.results import StackResult, step_of
from infercrane_pulumi.automation.state import holders
from infercrane_pulumi.cluster import deletion
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config.intents import ReplicaIntent
from infercrane_pulumi.errors import InferCraneError
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.program import components
from tests.conformance import replica
from tests.conformance.harness import ENGINE_BINARIES, require_toolchain, wait_for
from tests.conformance.replica import Replica, SharedBackend
from tests.conformance.test_shared_state import PLUGINS

# Left in a driver's TMPDIR each time its run path starts waiting for the stack's lock.
WAITING_MARK = "waiting-for-the-stack"
# Left in a driver's TMPDIR when it holds its run (``hold``), saying where.
HELD_MARK = "held"
APPLIED = "applied "  # an after-apply hold's mark: this, then the object's kind/name
PassOn = Callable[[Mapping[str, Any], Any], dict[str, Any]]
AsApplied = Callable[[Any, Any], Any]
DeleteAll = Callable[[Any, Any, Sequence[Any]], None]

# -- the driver process -----------------------------------------------------------------------


def _result(result: StackResult) -> dict[str, Any]:
    return {
        "ok": True,
        "verified": result.verified_unchanged,
        "changes": {r.external_key: r.change for r in result.replicas},
        "left": sorted({o.external_key for o in result.left}),
    }


def _export(stack: NamespaceStack) -> dict[str, Any]:
    deployment = stack.stack().export_stack().deployment or {}
    recorded = []
    for resource in deployment.get("resources") or []:
        token = str(resource.get("type", ""))
        name = ((resource.get("outputs") or {}).get("metadata") or {}).get("name")
        if token.startswith("kubernetes:") and name:
            recorded.append([token.rsplit(":", 1)[-1], name])
    pending = [
        [str(p.get("type")), str((p.get("resource") or {}).get("urn"))]
        for p in deployment.get("pending_operations") or []
    ]
    return {"ok": True, "pending": pending, "recorded": sorted(recorded)}


def answer(call: Mapping[str, Any], stack: Callable[[str], NamespaceStack]) -> dict[str, Any]:
    """The replica's answer, with ``apply``, ``remove``, ``destroy`` and ``export``."""
    if call["op"] not in ("apply", "remove", "destroy", "export"):
        return _pass_on(call, stack)
    chosen = stack(call["namespace"])
    chosen.wait_seconds = call.get("wait", 0.0)
    _holding.update(point=call.get("hold"), name=call.get("holdAfter"))
    try:
        if call["op"] == "export":
            return _export(chosen)
        if call["op"] == "destroy":
            return _result(chosen.destroy())
        if call["op"] == "remove":
            return _result(chosen.remove(call["key"]))
        intents = [ReplicaIntent.model_validate(entry) for entry in call["intents"]]
        # The rule's model: ``ensure`` names the whole desired set, empty ones included.
        return _result(chosen.ensure(intents, allow_empty=True))
    except InferCraneError as error:
        return {"ok": False, "error": error.to_record()}


_pass_on: PassOn = replica._answer


def _marking_waits(
    wait: Callable[[PulumiEnvironment, str, float], None],
) -> Callable[[PulumiEnvironment, str, float], None]:
    """``holders.wait_until_free`` that first leaves ``WAITING_MARK``: the test can then kill the
    holder while this replica waits for it, not before."""

    def waiting(env: PulumiEnvironment, stack_name: str, wait_seconds: float) -> None:
        (Path(tempfile.gettempdir()) / WAITING_MARK).touch()
        wait(env, stack_name, wait_seconds)

    return waiting


# Where the call in progress holds its run (``hold``), and after which object (``holdAfter``).
_holding: dict[str, str | None] = {"point": None, "name": None}


def _held_after(as_applied: AsApplied) -> AsApplied:
    """``components._as_applied`` that, for the object named by ``holdAfter``, resolves only
    once that object's create or update has returned, and then never."""

    def applied(obj: Any, child: Any) -> Any:
        record = as_applied(obj, child)
        if _holding["point"] != "after-apply" or obj["metadata"]["name"] != _holding["name"]:
            return record
        return record.apply(_hold)

    return applied


async def _hold(record: Mapping[str, Any]) -> Any:
    _mark_held(f"{APPLIED}{record['kind']}/{record['name']}")
    await asyncio.Event().wait()  # until the test kills the run
    return record


def _held_before(delete_all: DeleteAll) -> DeleteAll:
    """``deletion.delete_all`` that, under ``before-deletes``, never deletes anything."""

    def deleting(cluster: Any, settings: Any, objects: Sequence[Any]) -> None:
        if _holding["point"] == "before-deletes" and objects:
            _mark_held(f"the engine done, {len(objects)} objects to delete")
            threading.Event().wait()  # until the test kills the run
        delete_all(cluster, settings, objects)

    return deleting


def _mark_held(where: str) -> None:
    (Path(tempfile.gettempdir()) / HELD_MARK).write_text(where)


# -- the test's side --------------------------------------------------------------------------


class Driver(Replica):
    """A driver process for one namespace (``settings``, as ``settings_of`` gives them), its
    own workspace, PULUMI_HOME and TMPDIR under ``own``, whose name names it; ``wrapper``: the
    command it runs under (``test_in_cluster``'s Pod)."""

    def __init__(
        self,
        own: Path,
        backend: SharedBackend,
        settings: Mapping[str, Any],
        wrapper: Sequence[str] = (),
    ) -> None:
        self.name = own.name
        # The plugin installed as on any host: a copy of the same files (hard links).
        shutil.copytree(PLUGINS, own / "pulumi-home" / "plugins", copy_function=os.link)
        spec = {
            "backend": backend.url,
            "lease": backend.lease_url,
            "pulumiHome": str(own / "pulumi-home"),
            "workspace": str(own / "workspace"),
            "passphrase": "conformance-only",
            "binDir": str(require_toolchain(ENGINE_BINARIES)),
            "namespaces": {settings["namespace"]: settings},
        }
        (own / "spec.json").write_text(json.dumps(spec))
        self.tmp = own / "tmp"  # where its runs' private directories and event logs are
        self.tmp.mkdir(mode=0o700)
        self.stderr = (own / "stderr").open("w")
        self.process = subprocess.Popen(
            [*wrapper, sys.executable, "-m", __name__, str(own / "spec.json")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=os.environ | dict(backend.variables) | {"TMPDIR": str(self.tmp)},
            start_new_session=True,  # its own process group (each plugin makes its own)
        )
        self.answer()  # ready

    def held(self) -> str | None:
        """Where the driver holds the run of the call in progress (``hold``), None if it does
        not."""
        try:
            return (self.tmp / HELD_MARK).read_text() or None
        except FileNotFoundError:
            return None

    def answered(self) -> bool:
        """Whether the call in progress has answered (its line waits on stdout, unread)."""
        assert self.process.stdout is not None
        return bool(select.select([self.process.stdout], [], [], 0)[0])

    def await_answer(self, deadline: float) -> str | None:
        """Until the call in progress answers, holds its run, or the driver ends, at most to
        ``deadline``; where it holds, None if it does not."""
        while self.process.poll() is None and not self.answered() and time.monotonic() < deadline:
            if (where := self.held()) is not None:
                return where
            time.sleep(0.1)
        return None

    def answer_after_kill(self) -> dict[str, Any] | None:
        """After a kill: the answer of the call in progress, None if it was cut short."""
        self.process.wait(timeout=30)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        answer: dict[str, Any] | None = json.loads(line) if line else None
        return answer


# -- kill points ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """Where a run is killed: right after the first event ``matches`` accepts; with
    ``held``, once the driver holds the run there (``after-apply`` or ``before-deletes``:
    the module's docstring); ``matches`` then only names the step it is about."""

    name: str
    matches: Callable[[auto.EngineEvent], bool]
    held: Literal["", "after-apply", "before-deletes"] = ""


def prelude(event: auto.EngineEvent) -> bool:
    return event.prelude_event is not None


def summary(event: auto.EngineEvent) -> bool:
    """The engine's summary: every step has run, the state is being written."""
    return event.summary_event is not None


def step_starts(*ops: str) -> Callable[[auto.EngineEvent], bool]:
    """A step of ``ops`` on one of our Kubernetes objects, before the provider is called."""

    def matches(event: auto.EngineEvent) -> bool:
        step = step_of(event)
        return event.resource_pre_event is not None and step is not None and step.op in ops

    return matches


@dataclass
class Kill:
    """What a kill cut short: the event it followed, when, and the processes it ended."""

    point: str
    after: str = ""
    seconds: float = 0.0
    processes: dict[int, int | None] = field(default_factory=dict)  # pid: its start time
    seen: list[str] = field(default_factory=list)  # every event read before the kill
    engine_done: bool = False  # the engine had logged its summary: it had run every step
    answer: dict[str, Any] | None = None  # the call's own answer, when it came before the kill

    @property
    def landed(self) -> bool:
        return bool(self.after)


def describe(event: auto.EngineEvent) -> str:
    step = step_of(event)
    if step is not None:
        stage = "pre" if event.resource_pre_event is not None else "outputs"
        return f"{step.op} {step.kind}/{step.name} ({stage})"
    for name, value in vars(event).items():
        if name.endswith("_event") and value is not None:
            return name
    return "event"


def kill_at(
    driver: Driver,
    point: Point,
    call: Mapping[str, Any],
    *,
    admin: Cluster,
    namespace: str,
    timeout: float = 120.0,
    while_frozen: Callable[[], None] = lambda: None,
) -> Kill:
    """Send ``call`` to ``driver`` and SIGKILL its process tree (``kill_tree``) at ``point`` of
    that run, after ``while_frozen`` ran with the tree stopped. The kill did not land
    (``Kill.landed`` false) if the call answered first."""
    kill = Kill(point.name)
    fired = threading.Event()
    started = time.monotonic()

    def fire(after: str) -> None:
        kill.processes = kill_tree(driver.process.pid, while_frozen)
        kill.after, kill.seconds = after, time.monotonic() - started
        fired.set()

    def on_event(event: auto.EngineEvent) -> None:
        if fired.is_set():
            return
        kill.seen.append(describe(event))
        if not point.held and point.matches(event):
            fire(kill.seen[-1])

    hold: dict[str, str] = {"hold": point.held} if point.held else {}
    if point.held == "after-apply":
        key = ReplicaIntent.model_validate(call["intents"][-1]).external_key
        hold["holdAfter"] = naming.object_name(key)
    driver.send(call["op"], **{k: v for k, v in call.items() if k != "op"}, **hold)
    deadline = time.monotonic() + timeout
    # A call may answer without starting the engine (a verified no-op, a refusal), and a
    # destroy is held before its deletes, which come before its engine run: no run directory.
    run_dir = wait_for(
        lambda: (
            next(driver.tmp.glob("infercrane-run-*"), None)
            or driver.held()
            or driver.process.poll()
            or driver.answered()
        ),
        timeout=timeout,
        what=f"the engine run of {driver.name} to start",
    )
    if isinstance(run_dir, str):  # held before any engine run
        fire(f"held: {run_dir}")
    elif isinstance(run_dir, Path):
        tail = engine.Tail(run_dir / "events.jsonl", on_event, cli="(the suite's)")
        try:  # until the point, or the run's end (its private directory goes with it)
            while not fired.wait(0.1) and time.monotonic() < deadline:
                if (where := driver.held()) is not None:
                    if where.startswith(APPLIED):  # the point's claim, read back as admin
                        kind, name = where.removeprefix(APPLIED).split("/")
                        assert admin.get(workloads.KINDS[kind], namespace, name) is not None, where
                    fire(f"held: {where}")
                elif not run_dir.exists() or driver.process.poll() is not None:
                    break
        finally:
            tail.close()
        with contextlib.suppress(OSError):
            kill.engine_done = '"summaryEvent"' in (run_dir / "events.jsonl").read_text()
    # The run ended before the point. An up's before-deletes holds after its run directory
    # went, and may not have been read yet: its answer, or that hold (a soak once read the
    # run's end first and waited out its deadline for an answer the hold never gives).
    if not fired.is_set() and (where := driver.await_answer(deadline)) is not None:
        fire(f"held: {where}")
    if not fired.is_set():  # answered, or hung to the deadline: stop it all the same
        fired.set()
        kill.processes = kill_tree(driver.process.pid)
    kill.answer = driver.answer_after_kill()
    if kill.answer is not None:
        kill.after = ""  # the call answered before it was killed: the point was not reached
    # As after a host's death: none of them is left, not even waiting to be reaped (PID 1 here
    # reaps orphans about 2s late, and the file backend's lock of a zombie looks held).
    ended = time.monotonic() + 30
    while left := survivors(kill.processes):
        assert time.monotonic() < ended, f"{driver.name}'s processes outlived the kill: {left}"
        time.sleep(0.1)
    return kill


def survivors(processes: Mapping[int, int | None]) -> list[str]:
    """Those of ``processes`` (pid: start time) still in the process table, zombies too."""
    left = []
    for pid, started in sorted(processes.items()):
        if started is not None and process_start_ticks(pid) == started:
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                left.append(f"{pid} {b' '.join(argv).decode(errors='replace')[:160]}")
    return left


if __name__ == "__main__":
    replica._answer = answer
    # The run path looks the function up in the module at each call.
    vars(holders)["wait_until_free"] = _marking_waits(holders.wait_until_free)
    vars(components)["_as_applied"] = _held_after(components._as_applied)
    vars(deletion)["delete_all"] = _held_before(deletion.delete_all)
    raise SystemExit(replica.main(sys.argv[1:]))
