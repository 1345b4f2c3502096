"""Bounded state on every backend we prune: a stack that grew Pulumi's unbounded history is
pruned by its next update, and from then on holds its checkpoint and its newest
``kept_updates`` updates, no backup, on a file directory, S3 (versitygw) and PostgreSQL.

Every claim is read behind the product's back: the state directory's files, the S3 server's
own directory, the PostgreSQL table's rows; and ``pulumi stack history`` lists the kept
updates. The state's bytes per run, before and after the bound, are printed. The layout it
relies on is Pulumi's own (engine contract 12), so it runs on each CLI the docs name.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from infercrane_dev.statestores import s3
from infercrane_dev.statestores.postgres import DATABASE, PostgresServer
from infercrane_dev.statestores.s3 import S3Server
from infercrane_pulumi import automation
from infercrane_pulumi.automation import project, stacks
from infercrane_pulumi.automation.engine import history
from tests.conformance.harness import ENGINE_CLIS, Harness, intent, show

pytestmark = pytest.mark.conformance

KEPT = 2
REPLICAS = 5
UNBOUNDED_RUNS = 3  # Pulumi's own behaviour first: every update and a backup kept


@dataclass(frozen=True)
class State:
    """One backend as a run sees it, and its stored objects as the store itself holds them."""

    env: automation.PulumiEnvironment
    stored: Callable[[str], dict[str, int]]  # a stack's keys (Pulumi's names) -> bytes


def files(root: Path) -> Callable[[str], dict[str, int]]:
    def stored(stack: str) -> dict[str, int]:
        found = (p for p in root.rglob("*") if p.is_file() and stack in p.as_posix())
        return {p.relative_to(root).as_posix(): p.stat().st_size for p in found}

    return stored


def rows(server: PostgresServer) -> Callable[[str], dict[str, int]]:
    def stored(stack: str) -> dict[str, int]:
        with server.connect() as admin:
            found = admin.execute(
                "SELECT key, octet_length(data::text) FROM pulumi_state WHERE key LIKE %s",
                (f"%{stack}%",),
            ).fetchall()
        return {str(key).removeprefix(f"{DATABASE}/"): int(size) for key, size in found}

    return stored


@pytest.fixture(params=["file", "s3", "postgres"])
def state(request: pytest.FixtureRequest, harness: Harness, tmp_path: Path) -> State:
    base: dict[str, Any] = {
        "pulumi_home": harness.env.pulumi_home,
        "passphrase": harness.env.passphrase,
        "bin_dir": harness.env.bin_dir,
        "kubeconfig": harness.env.kubeconfig,
    }
    if request.param == "file":
        directory = tmp_path / "state"
        return State(automation.PulumiEnvironment(state_dir=directory, **base), files(directory))
    database: PostgresServer = request.getfixturevalue("postgres_server")
    if request.param == "postgres":
        env = automation.PulumiEnvironment.for_backend(database.url_with_password, **base)
        return State(env, rows(database))
    bucket: S3Server = request.getfixturevalue("s3_server")
    env = automation.PulumiEnvironment.for_backend(
        bucket.url,
        lease_url=database.url_with_password,
        backend_variables=bucket.variables,
        **base,
    )
    return State(env, files(bucket.root / s3.BUCKET))


def stack_history(
    env: automation.PulumiEnvironment, workspace: Path, name: str
) -> list[dict[str, Any]]:
    """``pulumi stack history``'s updates, newest first."""
    stack = stacks.open_stack(name, project_dir=workspace, env=env)
    done = stack.workspace.pulumi_command.run(
        ["stack", "history", "--json", "--stack", name], str(workspace), stack.workspace.env_vars
    )
    listed: list[dict[str, Any]] = json.loads(done.stdout)
    return listed


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_a_stack_keeps_its_checkpoint_and_its_newest_updates_and_no_backup(
    harness: Harness, state: State, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    name = harness.stack_name
    layout = history.Layout(project.PROJECT_NAME, name)
    workspace = tmp_path / "workspace"
    keys = [f"bounded-r{i}" for i in range(REPLICAS)]
    revisions = dict.fromkeys(keys, "rev-0")
    sizes: list[int] = []
    counts: list[int] = []

    def run(env: automation.PulumiEnvironment, step: int) -> None:
        # One revision changed per run, as a rollout steps: the checkpoint keeps its size.
        revisions[keys[step % REPLICAS]] = f"rev-{step}"
        intents = [intent(k, modelRevision=revision) for k, revision in revisions.items()]
        on = dataclasses.replace(harness, env=env)
        done = on.namespace_stack(workspace, stack_name=name).ensure(intents)
        assert step == 0 or [r.change for r in done.replicas].count("update") == 1
        found = state.stored(name)
        sizes.append(sum(found.values()))
        counts.append(len(history.updates(layout, found)))

    unbounded = dataclasses.replace(state.env, kept_updates=None, keep_backups=True)
    for step in range(UNBOUNDED_RUNS):
        run(unbounded, step)
    assert counts == [1, 2, 3]  # Pulumi's own: every update kept
    grown = state.stored(name)
    assert any(layout.backups in key for key in grown)

    bounded = dataclasses.replace(state.env, kept_updates=KEPT)
    started: list[int] = []
    for step in range(UNBOUNDED_RUNS, UNBOUNDED_RUNS + KEPT + 3):
        started.append(int(time.time()))
        run(bounded, step)
    assert counts[UNBOUNDED_RUNS:] == [KEPT] * (KEPT + 3)  # pruned by the first bounded run
    left = state.stored(name)
    checkpoint = layout.checkpoint
    assert checkpoint in left
    updates = history.updates(layout, left)
    assert len(updates) == KEPT and all(len(pair) == 2 for pair in updates.values())
    assert history.surplus(layout, left, keep=KEPT, keep_backups=False) == []
    others = set(left) - {checkpoint} - {k for pair in updates.values() for k in pair}
    assert {k for k in others if not k.endswith(".attrs")} == set()
    # The DIY backend numbers no update (version 0): the kept ones are the last runs'.
    listed = stack_history(bounded, workspace, name)
    assert [(u["kind"], u["result"]) for u in listed] == [("update", "succeeded")] * KEPT
    listed_starts = [datetime.fromisoformat(u["startTime"]).timestamp() for u in listed]
    assert all(a >= b for a, b in zip(listed_starts, started[::-1], strict=False))
    runs = UNBOUNDED_RUNS + KEPT + 3

    before = (sizes[UNBOUNDED_RUNS - 1] - sizes[0]) / (UNBOUNDED_RUNS - 1)
    after = (sizes[-1] - sizes[UNBOUNDED_RUNS]) / (KEPT + 2)
    show(
        pytestconfig,
        f"state on {state.env.backend.split(':')[0]} at {REPLICAS} intents (checkpoint "
        f"{left[checkpoint]} B): Pulumi's own {before:+.0f} B per run, kept_updates={KEPT} "
        f"{after:+.0f} B per run, {sizes[-1]} B in all after {runs} runs",
    )
