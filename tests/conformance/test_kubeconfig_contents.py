"""Kubeconfig *contents* as the stack's only credentials: they work end to end, and the
provider's token is stored encrypted, never in plain text in the stack file, the state, the
run's output or a file the run leaves in the temporary directory."""

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
    for path in harness.stored_files():
        assert token.encode() not in path.read_bytes(), path
    assert token not in harness.text()
