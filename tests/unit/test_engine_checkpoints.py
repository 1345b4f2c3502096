"""A local directory's stack checkpoint read as data, and the CLI asked whenever it cannot be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infercrane_pulumi.automation import stacks
from infercrane_pulumi.automation.engine import checkpoints
from tests.unit.test_stacks import outputs, outputs_of

STACK = "s1"
PROJECT = "infercrane"
SECRET = {checkpoints.SPECIAL_VALUE_KEY: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "x"}


def checkpoint(root_outputs: dict[str, Any] | None) -> dict[str, Any]:
    """What the DIY backend writes: the root stack resource, then one child of it."""
    stack_urn = f"urn:pulumi:{STACK}::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-{STACK}"
    resources = [
        {"urn": stack_urn, "custom": False, "type": checkpoints.ROOT_TYPE}
        | ({} if root_outputs is None else {"outputs": root_outputs}),
        {
            "urn": f"urn:pulumi:{STACK}::{PROJECT}::pulumi:pulumi:Stack$x:y::z",
            "custom": False,
            "type": "x:y",
            "parent": stack_urn,
            "outputs": {"not": "the stack's"},
        },
    ]
    latest = {"manifest": {"version": "v3.274.0"}, "resources": resources}
    return {
        "version": 3,
        "checkpoint": {"stack": f"organization/{PROJECT}/{STACK}", "latest": latest},
    }


def write(state: Path, content: Any, suffix: str = ".json") -> str:
    """``content`` as the stack's checkpoint under ``state``; the backend's URL."""
    stacks_dir = state / ".pulumi" / "stacks" / PROJECT
    stacks_dir.mkdir(parents=True, exist_ok=True)
    text = content if isinstance(content, str) else json.dumps(content)
    (stacks_dir / f"{STACK}{suffix}").write_text(text)
    return state.resolve().as_uri()


def test_the_root_stack_outputs_are_read_from_the_file(tmp_path: Path) -> None:
    written = outputs(None)
    assert checkpoints.outputs(write(tmp_path, checkpoint(written)), PROJECT, STACK) == written


@pytest.mark.parametrize(
    ("latest", "read"),
    [
        ({"resources": []}, {}),
        ({"resources": [{"type": checkpoints.ROOT_TYPE}]}, {}),
        (None, None),
        ({"manifest": {}}, None),
        ({"resources": [{"type": "x:y", "urn": "urn:pulumi:s1::infercrane::x:y::z"}]}, None),
    ],
    ids=[
        "no resources",
        "a root without outputs",
        "no latest deployment",
        "no resources listed",
        "no root stack",
    ],
)
def test_only_a_checkpoint_positively_without_outputs_reads_as_none_recorded(
    tmp_path: Path, latest: dict[str, Any] | None, read: dict[str, Any] | None
) -> None:
    """Unknown is never empty: a removal that read "no outputs" would keep nothing, so what
    this reader cannot tell apart from a stack that applied nothing the CLI answers."""
    content = {
        "version": 3,
        "checkpoint": {"stack": "organization/infercrane/s1", "latest": latest},
    }
    assert checkpoints.outputs(write(tmp_path, content), PROJECT, STACK) == read


def test_the_components_a_deployment_holds_are_read_by_type() -> None:
    deployment = checkpoint(None)["checkpoint"]["latest"]
    assert checkpoints.components(deployment, "x:y") == frozenset({"z"})
    assert checkpoints.components(deployment, "a:b") == frozenset()
    assert checkpoints.components({"manifest": {}}, "x:y") == frozenset()  # none, as exported
    unknowns: list[Any] = [None, [], {"resources": {}}, {"resources": [{"type": "x:y"}]}]
    for unknown in unknowns:
        assert checkpoints.components(unknown, "x:y") is None


def test_what_only_the_cli_can_tell_answers_none(tmp_path: Path) -> None:
    url = tmp_path.resolve().as_uri()
    assert checkpoints.outputs(url, PROJECT, STACK) is None  # no checkpoint file
    for other in (None, "s3://bucket/prefix", "postgres://u@db/state", f"{url}?no_tmp_dir=true"):
        assert checkpoints.outputs(other, PROJECT, STACK) is None
    ours = checkpoint(outputs(None))
    refused = {
        "another schema": ours | {"version": 4},
        "not JSON": '{"version": 3, "checkpoint": {',
        "a secret, deep": checkpoint({"replicas": {"a": {"objects": [{"uid": SECRET}]}}}),
        "a compressed form beside it": ours,
    }
    for why, content in refused.items():
        state = tmp_path / why.replace(" ", "-").replace(",", "")
        url = write(state, content)
        if why == "a compressed form beside it":
            write(state, "", ".json.gz")
        assert checkpoints.outputs(url, PROJECT, STACK) is None, why


def test_applied_reads_the_file_without_the_cli_and_both_agree(tmp_path: Path) -> None:
    written = outputs(None)
    url = write(tmp_path, checkpoint(written))
    from_file = stacks.applied(outputs_of(None, url))
    assert from_file == stacks.applied(outputs_of(written, "s3://bucket"))
    assert from_file.records == written["replicas"]
    # A checkpoint the reader does not know goes to the CLI.
    write(tmp_path, checkpoint({"replicas": {"a": SECRET}}))
    assert stacks.applied(outputs_of(written, url)) == from_file
