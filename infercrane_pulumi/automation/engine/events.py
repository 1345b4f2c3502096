"""The engine's event log, read while the engine writes it.

``pulumi up/preview/destroy`` appends one JSON engine event per line to FILE as it works: its
``--event-log FILE``, or its JSON display written there (``process``). A ``Tail`` follows that
file from a thread and hands each event, decoded, to a callback, in order; ``close`` waits
until everything written has been handed over. No CLI, no network.
A line that is not an engine event the SDK decodes fails the run closed
(``EngineUnsupportedError``, naming the CLI version): a run's results are never decided from
part of its events.

Each step's event carries the resource's whole state, old and new (kilobytes per object): decoding
every one cost the driver 2.5-2.9 s of CPU, and as much again in garbage collection, for one key
added to a stack of 1,000, on the cores the engine needs
(benchmarks/results/history-until-2026-12.md). So the ``same`` steps of URNs the caller already
knows the outcome of are left undecoded: recognized by the first bytes the engine writes for a step,
anything else is decoded.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi.errors import EngineUnsupportedError

POLL_SECONDS = 0.05
# How the engine begins a step's line (Go's encoder keeps its fields' declared order); a line
# laid out otherwise is simply decoded.
_SAME_STEP = re.compile(
    r'\{"sequence":\d+,"timestamp":\d+,"(?:resourcePreEvent|resOutputsEvent)":'
    r'\{"metadata":\{"op":"same","urn":"([^"\\]*)"'
)


def known_same_step(line: str, urns: frozenset[str]) -> bool:
    """Whether ``line`` is the event of a ``same`` step on one of ``urns``."""
    found = _SAME_STEP.match(line) if urns else None
    return found is not None and found.group(1) in urns


def decoded(line: str, cli: str) -> auto.EngineEvent:
    """One line of the event log as the SDK decodes an engine event; ``cli``: the CLI version
    that wrote it, for the refusal."""
    try:
        return auto.EngineEvent.from_json(json.loads(line))
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise EngineUnsupportedError(
            f"Pulumi CLI {cli}: its event log holds a line that is not an engine event "
            f"({type(error).__name__}); InferCrane decided nothing from this run's events"
        ) from None


def policy_message(event: auto.PolicyEvent, description: str | None) -> str:
    """What a policy reported, without the rule's description the engine puts before it."""
    return event.message.removeprefix(f"{description}\n").strip()


class Tail:
    """Follows ``path`` (which may not exist yet) until closed. ``same`` steps on ``unread``
    URNs are skipped, every other event is handed to ``callback``. ``cli``: the version of the
    CLI writing it."""

    def __init__(
        self,
        path: Path,
        callback: Callable[[auto.EngineEvent], Any],
        unread: frozenset[str] = frozenset(),
        *,
        cli: str,
    ) -> None:
        self._path = path
        self._callback = callback
        self._unread = unread
        self._cli = cli
        self._done = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._follow, name="engine-events", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Read what is left, then stop; re-raises (once) what the callback raised."""
        self._done.set()
        self._thread.join()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _follow(self) -> None:
        try:
            self._read()
        except BaseException as failure:  # handed to the caller's thread by close()
            self._failure = failure

    def _read(self) -> None:
        while not self._path.exists():
            if self._done.wait(POLL_SECONDS):
                if not self._path.exists():
                    return  # the engine never started writing
                break
        pending = ""
        with self._path.open(encoding="utf-8") as log:
            while True:
                finished = self._done.is_set()  # before reading: nothing after it is missed
                chunk = log.readline()
                if chunk:
                    pending += chunk
                    if pending.endswith("\n"):
                        if not known_same_step(pending, self._unread):
                            self._callback(decoded(pending, self._cli))
                        pending = ""
                    continue
                if finished:
                    return
                self._done.wait(POLL_SECONDS)
