"""Who holds a stack, and the run path's one door to a stack's state: ``exclusive`` holds it
for its caller alone, and the ``Held`` it answers is all a run asks of the state.

Operations on one stack are serialized within this process (``serialized``); across processes
Pulumi's stack lock decides, read where the file backend keeps it (``engine.locks``), and a
caller may wait for it up to a deadline (``wait_until_free``). A stack lease (``leases``) is
the other way across processes, on shared backends. What a dead run left is recovered
(``recovery``), and an update's history pruned (``retention``), through ``Held`` too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from pulumi import automation as auto

from infercrane_pulumi.automation import engine
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.state import blobs, leases, recovery, retention
from infercrane_pulumi.errors import StackBusyError

LOCK_POLL_SECONDS = 0.5

_guards: dict[tuple[str, str], threading.RLock] = {}
_guards_lock = threading.Lock()


@dataclass(frozen=True)
class Held:
    """A stack held by its caller alone (``exclusive``), and its lease when the backend has
    stack leases: what a run needs to be sure that what it reads stays true until it ends, and
    its way to the stack's locks and history on ``env``'s backend."""

    stack_name: str
    lease: leases.Lease | None
    env: PulumiEnvironment = field(repr=False)

    def alone(self) -> bool:
        """Whether no other operation can be changing the stack now (under a lease, none can)."""
        return self.lease is not None or not held_elsewhere(self.env, self.stack_name)

    def free(self, wait_seconds: float) -> None:
        """Without a lease, before an engine starts: what a dead run left recovered, then a
        live holder's lock waited for (``StackBusyError`` after ``wait_seconds``)."""
        recovery.recover(self.env, self.stack_name)
        wait_until_free(self.env, self.stack_name, wait_seconds)

    def break_fenced(self, stack: auto.Stack) -> list[str]:
        """Under the lease, after its fence: the locks its holders' engines left broken
        (``recovery.break_fenced``)."""
        assert self.lease is not None
        return recovery.break_fenced(self.env, stack, self.lease.engines())

    def history(self) -> blobs.Store | None:
        """Where an update's history is pruned (``retention.store``): asked before anything is
        written, so that a backend this cannot prune is refused then."""
        return retention.store(self.env)

    def prune(self, store: blobs.Store) -> list[str]:
        """The stack's history beyond the retention deleted, after an update succeeded."""
        return retention.prune(store, self.stack_name, self.env)


@contextlib.contextmanager
def exclusive(env: PulumiEnvironment, stack_name: str, wait_seconds: float) -> Iterator[Held]:
    """The stack to this caller alone, so that what it reads stays true until its run ends:
    serialized within this process, and across replicas by the stack's lease when the backend
    has one (``StackBusyError`` if not had within ``wait_seconds``). What a dead run left on
    the file backend is recovered before the caller reads anything: a stack opened before a
    run of it was killed (a kept ``NamespaceStack``) could not read its torn checkpoint."""
    with serialized(env, stack_name), leases.held(env, stack_name, wait_seconds) as lease:
        recovery.recover(env, stack_name)
        yield Held(stack_name, lease, env)


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
