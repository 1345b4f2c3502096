"""Kubeconfig *contents* as the stack's only credentials: they work end to end, and the client
key is stored encrypted, never in plain text in the stack file, the state or the run's output."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import yaml
from pulumi import automation as auto

from infercrane_pulumi import kinds, naming
from tests.conformance.harness import Harness, replica

pytestmark = pytest.mark.conformance


def provider_only(kubeconfig: dict[str, Any], context: str) -> dict[str, Any]:
    """The kubeconfig reduced to one context: what an operator hands the control plane."""
    [entry] = [c for c in kubeconfig["contexts"] if c["name"] == context]
    return kubeconfig | {
        "contexts": [entry],
        "users": [u for u in kubeconfig["users"] if u["name"] == entry["context"]["user"]],
        "clusters": [c for c in kubeconfig["clusters"] if c["name"] == entry["context"]["cluster"]],
    }


def test_kubeconfig_contents_work_end_to_end_and_are_stored_encrypted(harness: Harness) -> None:
    full = yaml.safe_load(harness.control_plane.kubeconfig_path.read_text())
    contents = yaml.safe_dump(provider_only(full, harness.control_plane.provider_context))
    [user] = yaml.safe_load(contents)["users"]
    client_key = user["user"]["client-key-data"]

    harness.configure([replica("contents-r0")])
    stack = harness.stack()
    stack.set_config(
        "infercrane:kubernetes.kubeconfig", auto.ConfigValue(contents, secret=True), path=True
    )
    # No kubeconfig on disk for this run: only the contents can reach the cluster.
    without_file = dataclasses.replace(harness.env, kubeconfig=harness.workdir / "absent")
    result = harness.up(without_file)
    assert result.summary.result == "succeeded"

    deployment = harness.get(kinds.DEPLOYMENT, "contents-r0")
    assert deployment is not None
    assert naming.is_exactly_ours(deployment["metadata"], harness.namespace, "contents-r0")

    stack_file = harness.stack_file.read_text()
    assert client_key not in stack_file
    assert yaml.safe_load(stack_file)["config"]["infercrane:kubernetes"]["kubeconfig"].keys() == {
        "secure"
    }
    # The state holds the contents (the decrypting export shows them) but only encrypted on disk.
    assert client_key in json.dumps(stack.export_stack().deployment)
    for path in harness.stored_files():
        assert client_key.encode() not in path.read_bytes(), path
    assert client_key not in harness.text()
