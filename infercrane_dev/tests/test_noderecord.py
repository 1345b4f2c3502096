"""The machine's record of its real node names an abandoned node, and only an abandoned one."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from infercrane_dev.localcluster import hostlock, noderecord

ROOT = "/tmp/cluster/node"
NODE = {"name": "infercrane-real-node", "root": ROOT, "processes": []}


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_node_whose_lock_is_held_and_owner_alive_is_not_abandoned(tmp_path: Path) -> None:
    record, lock = tmp_path / "node.json", tmp_path / "node.lock"
    noderecord.save(NODE, owner=os.getpid(), path=record)
    with hostlock.held(lock):
        assert noderecord.abandoned(record, lock) is None
    # Detached (no owner): only the lock says it still runs.
    noderecord.save(NODE, owner=None, path=record)
    with hostlock.held(lock):
        assert noderecord.abandoned(record, lock) is None


def test_a_free_lock_or_a_dead_owner_means_abandoned(tmp_path: Path) -> None:
    record, lock = tmp_path / "node.json", tmp_path / "node.lock"
    assert noderecord.abandoned(record, lock) is None  # no record at all
    noderecord.save(NODE, owner=os.getpid(), path=record)
    assert noderecord.abandoned(record, lock) == NODE  # every process of it died
    noderecord.save(NODE, owner=_dead_pid(), path=record)
    with hostlock.held(lock):  # its lock's holder lives on, its owner does not
        assert noderecord.abandoned(record, lock) == NODE


def test_an_owner_pid_reused_by_another_process_is_a_dead_owner(tmp_path: Path) -> None:
    record, lock = tmp_path / "node.json", tmp_path / "node.lock"
    noderecord.save(NODE, owner=os.getpid(), path=record)
    saved = json.loads(record.read_text(encoding="utf-8"))
    saved["owner"]["start_ticks"] += 1
    record.write_text(json.dumps(saved), encoding="utf-8")
    with hostlock.held(lock):
        assert noderecord.abandoned(record, lock) == NODE


def test_forget_removes_only_the_named_nodes_record(tmp_path: Path) -> None:
    record = tmp_path / "node.json"
    noderecord.save(NODE, owner=None, path=record)
    noderecord.forget(Path("/tmp/another/node"), record)
    assert json.loads(record.read_text(encoding="utf-8")) == {"owner": None, "node": NODE}
    noderecord.forget(Path(ROOT), record)
    assert not record.exists()
    assert sorted(tmp_path.iterdir()) == []  # no staging file left either
