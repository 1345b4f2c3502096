"""Reading the engine's event log while it is written: every event, whole, in order."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation.eventlog import Tail


def event(sequence: int) -> dict[str, Any]:
    stdout = {"message": f"line {sequence}", "color": "never"}
    return {"sequence": sequence, "timestamp": 0, "stdoutEvent": stdout}


def test_events_written_in_pieces_arrive_whole_and_in_order(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    seen: list[int] = []
    tail = Tail(log, lambda e: seen.append(e.sequence))
    written = threading.Event()

    def engine() -> None:
        with log.open("w", encoding="utf-8") as out:
            for sequence in range(1, 6):
                line = json.dumps(event(sequence)) + "\n"
                out.write(line[:10])  # a line half written when the reader looks
                out.flush()
                out.write(line[10:])
                out.flush()
        written.set()

    writer = threading.Thread(target=engine)
    writer.start()
    writer.join()
    written.wait()
    tail.close()
    assert seen == [1, 2, 3, 4, 5]


def test_a_log_never_written_gives_no_event(tmp_path: Path) -> None:
    seen: list[auto.EngineEvent] = []
    Tail(tmp_path / "never.jsonl", seen.append).close()
    assert seen == []


def test_what_the_callback_raises_reaches_the_caller_once(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(event(1)) + "\n", encoding="utf-8")

    def refuse(_: auto.EngineEvent) -> None:
        raise ValueError("a handler failed")

    tail = Tail(log, refuse)
    with pytest.raises(ValueError, match="a handler failed"):
        tail.close()
    tail.close()  # already reported
