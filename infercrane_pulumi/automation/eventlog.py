"""The engine's event log, read while the engine writes it.

``pulumi up/preview/destroy --event-log FILE`` appends one JSON engine event per line as it
works. A ``Tail`` follows that file from a thread and hands each event, decoded, to a callback,
in order; ``close`` waits until everything written has been handed over. No CLI, no network.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi import automation as auto

POLL_SECONDS = 0.05


class Tail:
    """Follows ``path`` (which may not exist yet) until closed."""

    def __init__(self, path: Path, callback: Callable[[auto.EngineEvent], Any]) -> None:
        self._path = path
        self._callback = callback
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
                        self._callback(auto.EngineEvent.from_json(json.loads(pending)))
                        pending = ""
                    continue
                if finished:
                    return
                self._done.wait(POLL_SECONDS)
