"""Reviewers see the same change twice: offline (two renderings of the stack file, no cluster)
and from the engine's real preview on the cluster. Both must name the same change per key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.harness import NO_SUCH_GPU, Harness
from tests.conformance.test_cli_and_faults import cli_env
from tests.unit.gitrepos import BASE_REPLICAS, HEAD_REPLICAS, commit, diff_json, git, new_repo

pytestmark = pytest.mark.conformance

# The unit tests' change set, for a GPU product no cluster has (as every scenario that does not
# need a node): its Pods stay Pending, so no controller writes status while the test compares.
BASE = [replica | {"gpu": NO_SUCH_GPU} for replica in BASE_REPLICAS]
HEAD = [replica | {"gpu": NO_SUCH_GPU} for replica in HEAD_REPLICAS]


def preview(harness: Harness, fmt: str) -> str:
    completed = harness.cli(
        "preview",
        "--stack",
        harness.stack_name,
        "--project-dir",
        str(harness.project_dir),
        "--format",
        fmt,
        env=cli_env(harness),
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout


def offline(harness: Harness, tmp_path: Path) -> list[tuple[str, str]]:
    """The offline diff of the same two stack files, committed base then head."""
    repo = new_repo(tmp_path / "repo")
    stack = repo / "stacks" / harness.stack_file.name
    stack.parent.mkdir()
    for replicas, message in ((BASE, "base"), (HEAD, "head")):
        config = {"infercrane:kubernetes": harness.kubernetes(), "infercrane:replicas": replicas}
        stack.write_text(yaml.safe_dump({"config": config}))
        commit(repo, message)
        if message == "base":
            git(repo, "tag", "base")
    data, _ = diff_json(base="base", configs=[stack], repo=repo)
    return sorted((r["externalKey"], r["change"]) for doc in data for r in doc["replicas"])


def test_the_engine_preview_comment_names_the_same_changes_as_the_offline_diff(
    harness: Harness, tmp_path: Path
) -> None:
    harness.configure(BASE)
    harness.up()
    harness.configure(HEAD)
    applied = harness.written()  # what our field manager wrote: the controllers' status aside

    envelope: dict[str, Any] = json.loads(preview(harness, "json"))
    engine = sorted((r["externalKey"], r["change"]) for r in envelope["result"]["replicas"])
    assert (
        engine
        == offline(harness, tmp_path)
        == [
            ("added", "create"),
            ("changed", "update"),
            ("kept", "same"),
            ("new-name", "create"),
            ("old-name", "delete"),
            ("removed", "delete"),
        ]
    )

    comment = preview(harness, "markdown")
    assert (
        comment.splitlines()[0] == f"#### InferCrane `preview` on infercrane/{harness.stack_name}"
    )
    assert "Plan: 2 to add, 1 to change, 2 to destroy, 1 unchanged" in comment
    assert "old-name" in comment and "new-name" in comment and "rename" in comment
    assert "16384" in comment and "8192" in comment  # the changed runtime argument, both sides
    assert harness.written() == applied  # previews write nothing
