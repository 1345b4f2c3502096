"""The JSON CLI a control plane in another language drives, and the faults it must survive:
a stack held by a live process, two processes at once, and the API server going away."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import signal
import subprocess
import sys
import uuid
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from infercrane_dev.localcluster.ports import LOOPBACK
from infercrane_pulumi.automation import NamespaceStack, stack_locks
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.errors import ClusterUnavailableError, StackBusyError
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.harness import ENGINE_CLIS, ROOT, Harness, intent, replica, wait_for
from tests.conformance.proxy import CuttableProxy

pytestmark = pytest.mark.conformance
SCHEMAS = ROOT / "infercrane_pulumi" / "schemas"
ENVELOPE = jsonschema.Draft202012Validator(
    json.loads((SCHEMAS / "envelope.schema.json").read_text())
)
PROGRESS = jsonschema.Draft202012Validator(
    json.loads((SCHEMAS / "progress.schema.json").read_text())
)


def cli_env(harness: Harness) -> dict[str, str]:
    """What an operator exports for the CLI: backend, passphrase, tools, kubeconfig."""
    assert harness.env.state_dir is not None and harness.env.bin_dir is not None
    return os.environ | {
        "PULUMI_BACKEND_URL": harness.env.state_dir.as_uri(),
        "PULUMI_CONFIG_PASSPHRASE": harness.env.passphrase,
        "PULUMI_HOME": str(harness.env.pulumi_home),
        "INFERCRANE_TOOLS_BIN": str(harness.env.bin_dir),
        "KUBECONFIG": str(harness.provider.kubeconfig),
    }


def cli(harness: Harness, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infercrane_pulumi",
            *args,
            "--stack",
            harness.stack_name,
            "--project-dir",
            str(harness.project_dir),
            "--json",
        ],
        env=cli_env(harness),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(process: subprocess.Popen[str]) -> tuple[int, dict[str, Any], str]:
    out, err = process.communicate(timeout=300)
    assert out.strip(), f"exit {process.returncode}, no envelope; stderr: {err[-3000:]}"
    envelope: dict[str, Any] = json.loads(out)
    ENVELOPE.validate(envelope)
    return process.returncode, envelope, err


@pytest.mark.pythons
@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_the_json_cli_previews_applies_observes_and_destroys_per_key(harness: Harness) -> None:
    harness.configure([replica("cli-a"), replica("cli-b")])

    code, previewed, _ = finished(cli(harness, "preview"))
    assert code == 0
    assert [(r["externalKey"], r["change"]) for r in previewed["result"]["replicas"]] == [
        ("cli-a", "create"),
        ("cli-b", "create"),
    ]
    assert harness.resource_versions() == {}

    code, applied, progress = finished(cli(harness, "up", "--events"))
    assert code == 0 and applied["result"]["summary"] == {
        "add": 2,
        "change": 0,
        "destroy": 0,
        "same": 0,
        "changes": 2,
    }
    lines = [json.loads(line) for line in progress.splitlines()]
    for line in lines:
        PROGRESS.validate(line)
    # In the engine's order, as its event log holds it: each resource's step before its
    # outcome, the summary after every outcome. A plugin's own output may still follow the
    # summary (the engine streams it as diagnostics until it closes the plugins; seen under
    # CI's load), so only diagnostics may come after it.
    sequences = [line["sequence"] for line in lines]
    assert sequences == sorted(set(sequences))
    types = [line["type"] for line in lines]
    assert types.count("summary") == 1
    after = types[types.index("summary") + 1 :]
    assert set(after) <= {"diagnostic"}, lines[types.index("summary") :]
    for urn in {line["urn"] for line in lines if "urn" in line}:
        assert [line["type"] for line in lines if line.get("urn") == urn] == ["step", "done"]
    assert {
        (line["externalKey"], line["op"])
        for line in lines
        if line["type"] == "done" and "externalKey" in line
    } == {
        ("cli-a", "create"),
        ("cli-b", "create"),
    }

    code, again, _ = finished(cli(harness, "up"))
    assert code == 0 and [r["change"] for r in again["result"]["replicas"]] == ["same", "same"]

    code, inspected, _ = finished(cli(harness, "inspect"))
    assert code == 0
    assert [(r["externalKey"], r["state"]) for r in inspected["result"]] == [
        ("cli-a", "provisioning"),
        ("cli-b", "provisioning"),
    ]

    code, destroyed, _ = finished(cli(harness, "destroy"))
    assert code == 0
    assert [(r["externalKey"], r["change"]) for r in destroyed["result"]["replicas"]] == [
        ("cli-a", "delete"),
        ("cli-b", "delete"),
    ]
    assert harness.owned(kinds.DEPLOYMENT) == []


def hold_lock(harness: Harness) -> tuple[subprocess.Popen[bytes], Path]:
    """A live process holding the stack's lock, as a running `pulumi up` elsewhere would."""
    assert harness.env.state_dir is not None
    holder = subprocess.Popen(["sleep", "300"])
    lock_dir = harness.env.state_dir / ".pulumi" / "locks" / "organization" / "infercrane"
    lock = lock_dir / harness.stack_name / f"{uuid.uuid4()}.json"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"pid": holder.pid, "hostname": os.uname().nodename}))
    return holder, lock


def test_a_stack_held_by_a_live_process_is_busy_and_retryable(harness: Harness) -> None:
    harness.configure([replica("busy-a")])
    harness.stack()
    holder, lock = hold_lock(harness)
    try:
        code, envelope, _ = finished(cli(harness, "up"))
        assert code == 4
        assert envelope["error"] == {
            "code": "stack-busy",
            "retryable": True,
            "problems": [
                f"stack {harness.stack_name}: its lock is held by process {holder.pid} on "
                f"{os.uname().nodename}"
            ],
        }
        # A caller that waits gets through once the holder is done.
        waiting = cli(harness, "up", "--wait", "120")
        wait_for(lambda: harness.owned(kinds.DEPLOYMENT) == [] or None, timeout=5, what="waiting")
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait()
        lock.unlink()
    code, envelope, _ = finished(waiting)
    assert code == 0 and [r["change"] for r in envelope["result"]["replicas"]] == ["create"]


def test_two_processes_updating_one_stack_at_once_both_succeed_when_they_wait(
    harness: Harness,
) -> None:
    keys = [f"race-{i}" for i in range(6)]
    harness.configure([replica(k) for k in keys])
    harness.stack()
    first = cli(harness, "up", "--wait", "300")
    wait_for(
        lambda: stack_locks(harness.env.state_dir, harness.stack_name),
        timeout=60,
        what="the first run to take the lock",
    )
    second = cli(harness, "up", "--wait", "300")
    results = [finished(first), finished(second)]
    assert [code for code, _, _ in results] == [0, 0], [e for _, e, _ in results]
    changes = sorted(
        tuple(r["change"] for r in envelope["result"]["replicas"]) for _, envelope, _ in results
    )
    assert changes == [("create",) * 6, ("same",) * 6]  # the second saw the first's work
    names = sorted(o["metadata"]["name"] for o in harness.owned(kinds.DEPLOYMENT))
    assert names == sorted(naming.object_name(k) for k in keys)


def open_event_loops() -> set[int]:
    """The event loops alive in this process and not closed, after a full collection."""
    gc.collect()
    return {
        id(found)
        for found in gc.get_objects()
        if isinstance(found, asyncio.AbstractEventLoop) and not found.is_closed()
    }


def test_the_api_server_going_away_mid_run_is_retryable_and_the_next_run_converges(
    harness: Harness, tmp_path: Path
) -> None:
    kubeconfig = harness.provider.document()
    [cluster] = kubeconfig["clusters"]
    server = urlsplit(cluster["cluster"]["server"])
    assert server.hostname is not None
    proxy = CuttableProxy(server.hostname, server.port or 443).start()
    cluster["cluster"]["server"] = f"https://{LOOPBACK}:{proxy.port}"
    if server.hostname != LOOPBACK:
        # The API server's certificate names its own host, not the proxy's.
        cluster["cluster"].setdefault("tls-server-name", server.hostname)
    settings = KubernetesSettings.model_validate(
        harness.kubernetes(kubeconfig=yaml.safe_dump(kubeconfig))
    )
    keys = [f"flaky-{i}" for i in range(20)]
    intents = [intent(k) for k in keys]
    cut: list[bool] = []
    before = open_event_loops()

    def cut_after_the_first_object(event: Any) -> None:
        if not cut and event.res_outputs_event is not None and harness.owned(kinds.DEPLOYMENT):
            proxy.cut()
            cut.append(True)

    stack = NamespaceStack(
        settings,
        harness.env,
        tmp_path / "workspace",
        stack_name=harness.stack_name,
        on_event=cut_after_the_first_object,
    )
    with pytest.raises(ClusterUnavailableError) as unavailable:
        stack.ensure(intents)
    assert unavailable.value.retryable and cut == [True]
    assert 0 < len(harness.owned(kinds.DEPLOYMENT)) < len(keys)

    proxy.start()  # the API server is back, at the same address
    stack.on_event = None
    result = stack.ensure(intents)
    assert {r.change for r in result.replicas} <= {"create", "update", "same"}
    for kind in (kinds.DEPLOYMENT, kinds.SERVICE):
        names = sorted(o["metadata"]["name"] for o in harness.owned(kind))
        assert names == sorted(naming.object_name(k) for k in keys)  # each exactly once
    assert not isinstance(unavailable.value, StackBusyError)
    [user] = kubeconfig["users"]
    harness.assert_backend_holds_no(user["user"]["token"])
    # The program was served from this process: the run its engine abandoned, long over now,
    # left no event loop open in it (nor one that warned, unclosed, when collected).
    with warnings.catch_warnings(record=True) as collected:
        warnings.simplefilter("always")
        assert open_event_loops() <= before
    assert [str(warning.message) for warning in collected] == []


def test_up_every_applies_again_when_the_file_changes_and_a_sigterm_ends_it_between_runs(
    harness: Harness,
) -> None:
    """The runner's loop (``up --every``, ``deploy/kubernetes/runner``): one envelope line per
    run, a run as soon as the stack file changes (long before the period), and SIGTERM ending
    the loop with exit 0 and no run after it."""
    harness.configure([replica("loop-a")])
    process = cli(harness, "up", "--every", "3600")
    assert process.stdout is not None
    envelopes = []

    def next_envelope() -> dict[str, Any]:
        line = process.stdout.readline() if process.stdout else ""
        assert line, f"the loop ended: exit {process.poll()}"
        envelope: dict[str, Any] = json.loads(line)
        ENVELOPE.validate(envelope)
        envelopes.append(envelope)
        return envelope

    def changes(envelope: dict[str, Any]) -> list[tuple[str, str]]:
        assert envelope["ok"], envelope
        return [(r["externalKey"], r["change"]) for r in envelope["result"]["replicas"]]

    try:
        assert changes(next_envelope()) == [("loop-a", "create")]
        harness.configure([replica("loop-a"), replica("loop-b")])
        assert changes(next_envelope()) == [("loop-a", "same"), ("loop-b", "create")]
        assert harness.get(kinds.DEPLOYMENT, "loop-b") is not None
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0 and out == "", out
    assert len(envelopes) == 2
