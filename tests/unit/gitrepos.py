"""Throwaway git repositories holding a stack file, for the offline diff's tests."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from infercrane_pulumi.cli import views
from infercrane_pulumi.review.offline_diff import diff_command
from tests.unit import samples

ROOT = Path(__file__).resolve().parents[2]
STACK = "stacks/Pulumi.test.yaml"
BASE_REPLICAS = [
    samples.replica(externalKey="kept"),
    samples.replica(externalKey="changed", runtimeArgs=["--max-model-len", "8192"]),
    samples.replica(externalKey="removed", model="org/removed"),
    samples.replica(externalKey="old-name", model="org/renamed"),
]
HEAD_REPLICAS = [
    samples.replica(externalKey="kept"),
    samples.replica(externalKey="changed", runtimeArgs=["--max-model-len", "16384"]),
    samples.replica(externalKey="new-name", model="org/renamed"),
    samples.replica(externalKey="added", model="org/added"),
]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout


def write_stack(
    repo: Path, replicas: Any, path: str = STACK, policy: Any = None, **kubernetes: Any
) -> None:
    config = {"infercrane:kubernetes": samples.kubernetes(**kubernetes)}
    if policy is not None:
        config["infercrane:policy"] = policy
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump({"config": config | {"infercrane:replicas": replicas}}))


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)


def new_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    shutil.copy(ROOT / "Pulumi.yaml", path / "Pulumi.yaml")
    return path


def two_commit_repo(tmp_path: Path) -> Path:
    """Two commits: the base stack, then four edits (kept, changed, removed+added, renamed)."""
    repo = new_repo(tmp_path / "repo")
    write_stack(repo, BASE_REPLICAS)
    commit(repo, "base")
    git(repo, "tag", "base")
    write_stack(repo, HEAD_REPLICAS)
    commit(repo, "head")
    return repo


def diff_json(
    *, base: str, configs: list[Path] | None, repo: Path
) -> tuple[list[dict[str, Any]], str]:
    """The offline diff as ``diff --json`` prints it (one document per stack), and its comment."""
    stacks, markdown = diff_command(base=base, configs=configs, repo=repo)
    return [views.stack_changes(stack) for stack in stacks], markdown
