"""Kubeconfig *contents* as the stack's only credentials: they work end to end, and the
provider's token is stored encrypted, never in plain text in the stack file, the state, the
run's output or a file the run leaves in the temporary directory. Contents in plain text are
refused before the engine starts. After each scenario the whole backend directory (state,
backups, update history, locks) is scanned for the credential."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from pulumi import automation as auto

from infercrane_pulumi import kinds, naming
from tests.conformance.harness import Harness, replica
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
    assert naming.is_exactly_ours(deployment["metadata"], harness.namespace, "contents-r0")

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
