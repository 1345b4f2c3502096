"""Reading the engine's event log while it is written: every event, whole, in order, but the
`same` steps of URNs the caller knows the outcome of."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation.engine.events import Tail, known_same_step
from infercrane_pulumi.errors import EngineUnsupportedError

CLI = "v3.274.0"


def event(sequence: int) -> dict[str, Any]:
    stdout = {"message": f"line {sequence}", "color": "never"}
    return {"sequence": sequence, "timestamp": 0, "stdoutEvent": stdout}


def test_events_written_in_pieces_arrive_whole_and_in_order(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    seen: list[int] = []
    tail = Tail(log, lambda e: seen.append(e.sequence), cli=CLI)
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
    Tail(tmp_path / "never.jsonl", seen.append, cli=CLI).close()
    assert seen == []


def test_what_the_callback_raises_reaches_the_caller_once(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(event(1)) + "\n", encoding="utf-8")

    def refuse(_: auto.EngineEvent) -> None:
        raise ValueError("a handler failed")

    tail = Tail(log, refuse, cli=CLI)
    with pytest.raises(ValueError, match="a handler failed"):
        tail.close()
    tail.close()  # already reported


KEPT = "urn:pulumi:s::infercrane::infercrane:kubernetes:Replica::infercrane-kept"


def step(sequence: int, kind: str, op: str, urn: str) -> dict[str, Any]:
    metadata = {"op": op, "urn": urn, "type": "infercrane:kubernetes:Replica", "old": None}
    return {"sequence": sequence, "timestamp": 1796230077, kind: {"metadata": metadata}}


def engine_line(value: dict[str, Any]) -> str:
    """A line as the engine writes it: Go's encoder, no spaces."""
    return json.dumps(value, separators=(",", ":")) + "\n"


def test_only_same_steps_on_known_urns_are_recognized() -> None:
    known = frozenset({KEPT})
    diagnostic = {"urn": KEPT, "message": "warning", "color": "never", "severity": "warning"}
    recognized = [
        known_same_step(engine_line(value), known)
        for value in (
            step(1, "resourcePreEvent", "same", KEPT),
            step(2, "resOutputsEvent", "same", KEPT),
            step(3, "resourcePreEvent", "update", KEPT),
            step(4, "resourcePreEvent", "same", KEPT + "-other"),
            {"sequence": 5, "timestamp": 0, "diagnosticEvent": diagnostic},
        )
    ]
    assert recognized == [True, True, False, False, False]
    # Laid out otherwise than the engine writes (spaces): decoded, never guessed at.
    assert not known_same_step(json.dumps(step(6, "resourcePreEvent", "same", KEPT)), known)
    assert not known_same_step(engine_line(step(7, "resourcePreEvent", "same", KEPT)), frozenset())


def test_same_steps_on_unread_urns_are_skipped_and_every_other_event_arrives(
    tmp_path: Path,
) -> None:
    log = tmp_path / "events.jsonl"
    written = [
        event(1),
        step(2, "resourcePreEvent", "same", KEPT),
        step(3, "resourcePreEvent", "create", KEPT + "-new"),
        step(4, "resOutputsEvent", "same", KEPT),
        event(5),
    ]
    log.write_text("".join(map(engine_line, written)), encoding="utf-8")
    seen: list[int] = []
    Tail(log, lambda e: seen.append(e.sequence), unread=frozenset({KEPT}), cli=CLI).close()
    assert seen == [1, 3, 5]


@pytest.mark.parametrize(
    "line",
    ['{"sequence": 1, "timestamp": 0, "stdoutEv', "not json at all", "[1, 2]"],
    ids=["cut", "not JSON", "not an event"],
)
def test_a_line_that_is_not_an_engine_event_fails_the_run_closed(tmp_path: Path, line: str) -> None:
    log = tmp_path / "events.jsonl"
    log.write_text(json.dumps(event(1)) + "\n" + line + "\n" + json.dumps(event(3)) + "\n")
    seen: list[int] = []
    tail = Tail(log, lambda e: seen.append(e.sequence), cli=CLI)
    with pytest.raises(EngineUnsupportedError) as refused:
        tail.close()
    assert seen == [1]  # nothing after it is decided on
    [problem] = refused.value.problems
    assert problem.startswith(f"Pulumi CLI {CLI}: its event log holds a line that is not an ")
    assert not refused.value.retryable
