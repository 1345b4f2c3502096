"""Kubeconfig *contents* as the stack's only credentials: they work end to end, and the
provider's token is stored encrypted, never in plain text in the stack file, the state, the
run's output or a file the run leaves in the temporary directory. Contents in plain text are
refused before the engine starts. After each scenario the whole backend directory (state,
backups, update history, locks) is scanned for the credential."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
import yaml
from pulumi import automation as auto

from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.cluster import verdict
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.harness import ENGINE_CLIS, Harness, intent, replica
from tests.conformance.test_cli_and_faults import cli, finished

pytestmark = pytest.mark.conformance


def test_kubeconfig_contents_work_end_to_end_and_are_stored_encrypted(harness: Harness) -> None:
    # What an operator hands the control plane: one context, one identity (here its token).
    contents = harness.provider.kubeconfig.read_text()
    [user] = yaml.safe_load(contents)["users"]
    token = user["user"]["token"]

    harness.configure([replica("contents-r0")])
    stack = harness.stack()
    stack.set_config(
        "infercrane:kubernetes.kubeconfig", auto.ConfigValue(contents, secret=True), path=True
    )
    # No kubeconfig on disk for this run: only the contents can reach the cluster.
    without_file = dataclasses.replace(harness.env, kubeconfig=harness.workdir / "absent")
    temp = Path(tempfile.gettempdir())
    before = set(temp.iterdir())
    result = harness.up(without_file)
    new = set(temp.iterdir()) - before
    left = [f for top in new for f in (top.rglob("*") if top.is_dir() else [top]) if f.is_file()]
    assert [f for f in left if token.encode() in f.read_bytes()] == []
    assert [r.change for r in result.replicas] == ["create"]

    deployment = harness.get(kinds.DEPLOYMENT, "contents-r0")
    assert deployment is not None
    assert verdict.is_exactly_ours(deployment["metadata"], harness.namespace, "contents-r0")

    stack_file = harness.stack_file.read_text()
    assert token not in stack_file
    assert yaml.safe_load(stack_file)["config"]["infercrane:kubernetes"]["kubeconfig"].keys() == {
        "secure"
    }
    # The state holds the contents (the decrypting export shows them) but only encrypted on disk.
    assert token in json.dumps(stack.export_stack().deployment)
    history = [p for p in harness.stored_files() if p.name.endswith(".history.json")]
    assert any(harness.stack_name in str(path) for path in history)  # the scan reads it
    harness.assert_backend_holds_no(token)
    assert token not in harness.text()


def test_plain_text_kubeconfig_contents_are_refused_before_the_engine_starts(
    harness: Harness,
) -> None:
    contents = harness.provider.kubeconfig.read_text()
    [user] = yaml.safe_load(contents)["users"]
    token = user["user"]["token"]
    harness.configure([replica("plain-r0")], kubeconfig=contents)
    before = {path: path.read_bytes() for path in harness.stored_files()}

    code, envelope, stderr = finished(cli(harness, "up"))
    assert code == 2
    assert envelope["error"]["code"] == "invalid-config"
    assert envelope["error"]["problems"] == [
        "infercrane:kubernetes.kubeconfig: kubeconfig contents in plain text; store them "
        "encrypted: pulumi config set --secret --path 'infercrane:kubernetes.kubeconfig' < file"
    ]
    assert token not in json.dumps(envelope) + stderr
    # Nothing was written: no stack, no history, no object.
    assert {path: path.read_bytes() for path in harness.stored_files()} == before
    assert harness.get(kinds.DEPLOYMENT, "plain-r0") is None
    harness.assert_backend_holds_no(token)


class CommandLines:
    """Every process's command line, read from ``/proc`` every few milliseconds while open."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CommandLines:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            for path in Path("/proc").glob("[0-9]*/cmdline"):
                with contextlib.suppress(OSError):
                    self.seen.add(path.read_bytes().replace(b"\0", b" ").decode(errors="replace"))


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_no_credential_is_on_any_command_line_while_a_namespace_stack_runs(
    harness: Harness, tmp_path: Path
) -> None:
    """Any local user may read ``/proc/<pid>/cmdline``: the kubeconfig contents reach the CLI
    on stdin and the passphrase in its environment, never in a command line."""
    contents = harness.provider.kubeconfig.read_text()
    [user] = yaml.safe_load(contents)["users"]
    token = user["user"]["token"]
    passphrase = f"passphrase-{uuid.uuid4().hex}"
    env = dataclasses.replace(harness.env, kubeconfig=None, passphrase=passphrase)
    settings = harness.kubernetes(kubeconfig=contents)
    with CommandLines() as lines:
        for workspace in ("first", "second"):  # a new process's stack stores them again
            stack = NamespaceStack(
                KubernetesSettings.model_validate(settings),
                env,
                tmp_path / workspace,
                stack_name=harness.stack_name,
            )
            stack.ensure([intent(f"argv-{workspace}")])
    stored = [line for line in lines.seen if " config set " in line and "kubeconfig" in line]
    assert len(stored) >= 1, "the sampler never saw the CLI store the kubeconfig"
    assert any(" up " in line and harness.stack_name in line for line in lines.seen)
    leaking = [line for line in lines.seen if token in line or passphrase in line]
    assert leaking == []
    assert [o["metadata"]["name"] for o in harness.owned(kinds.DEPLOYMENT)] == [
        naming.object_name("argv-second")
    ]
