"""Who holds a stack, and waiting until nobody else does.

Operations on one stack are serialized within this process (``serialized``); across processes
Pulumi's stack lock decides, read where the file backend keeps it (``engine.locks``), and a
caller may wait for it up to a deadline (``wait_until_free``). A stack lease (``leases``) is
the other way across processes, on shared backends.
"""

from __future__ import annotations

import threading
import time

from infercrane_pulumi.automation import engine
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.errors import StackBusyError

LOCK_POLL_SECONDS = 0.5

_guards: dict[tuple[str, str], threading.RLock] = {}
_guards_lock = threading.Lock()


def serialized(env: PulumiEnvironment, stack_name: str) -> threading.RLock:
    """The in-process lock of one stack: hold it across writing config and running."""
    with _guards_lock:
        return _guards.setdefault((env.backend, stack_name), threading.RLock())


def holders(env: PulumiEnvironment, stack_name: str) -> list[engine.Lock]:
    """The live operations (of other processes) holding the stack's lock right now, and any
    lock of a holder the engine's reader cannot name (``engine.locks``: it fails closed)."""
    return [lock for lock in engine.stack_locks(env.local_state, stack_name) if not lock.stale]


def held_elsewhere(env: PulumiEnvironment, stack_name: str) -> bool:
    """Whether the stack's lock may be held by another operation right now."""
    return bool(holders(env, stack_name))


def wait_until_free(env: PulumiEnvironment, stack_name: str, wait_seconds: float) -> None:
    deadline = time.monotonic() + wait_seconds
    while found := holders(env, stack_name):
        if time.monotonic() >= deadline:
            raise StackBusyError(
                f"stack {stack_name}: its lock is held by {found[0].holder}"
                + (f" (waited {wait_seconds:.0f}s)" if wait_seconds else "")
            )
        time.sleep(LOCK_POLL_SECONDS)
