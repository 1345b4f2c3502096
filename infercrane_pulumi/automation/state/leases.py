"""Stack leases in PostgreSQL: at most one live replica runs a stack, and a replica that dies
gives its stacks up with its connection.

Pulumi's DIY locks have no lease: a replica that dies mid-run leaves its lock for ever, and
only a lock taken on this host can be proven dead (``locks``). A lease is a session-level
advisory lock (``pg_advisory_lock``) on one connection, keyed by backend and stack
(``backends.lease_key``); PostgreSQL releases it when that connection ends, whatever ended it.
Holding it proves that no live replica runs the stack, and each holder records every engine it
starts (host and pid, ``started``) until it sees it end: so a Pulumi lock found under the lease
whose holder is such an engine is stale, once ``FENCE_SECONDS`` have passed since the lease was
taken (by then a previous holder that lost its lease has stopped its engine, below), and may be
broken from any host (``recovery.break_fenced``). Any other lock (a person's ``pulumi up`` on
the same backend, which takes no lease) is a live holder's, and is never broken.

The failure model (docs/explanation/failure-model.md):

- the holder dies (process or host): the kernel closes its connection, the server releases
  the lease at once, the next replica's ``held`` returns;
- the holder lives but its connection drops (database restart, network cut, the session
  terminated): a heartbeat every ``HEARTBEAT_SECONDS`` fails, or goes unanswered for
  ``CLIENT_TIMEOUT_MS``, and the holder kills its run's processes (``fencing``) and reports
  ``BackendUnavailableError`` (retryable): the run never goes on writing unguarded; the
  lease is asked again when the engine ends, so a loss the heartbeat had not seen yet fails
  the run the same way;
- the holder is partitioned from the database but alive: the same heartbeat stops its run
  after at most ``HEARTBEAT_SECONDS + CLIENT_TIMEOUT_MS``, while the server keeps the lease
  until its keepalives (``SERVER_KEEPALIVES``) give the session up, about 10 s after the
  last heartbeat: the lease cannot pass to another replica while the holder still runs;
- the database is unreachable: no lease, ``BackendUnavailableError`` (retryable); it refuses
  us (credentials, database, permission): ``BackendRefusedError``. Never the URL's password.

What this does not cover: a holder frozen (SIGSTOP, a paused VM) for longer than the server's
keepalives, which resumes and writes before its next heartbeat; and an engine killed between
its start and its record (the record fails only with the lease's connection, which stops the
run): its lock is then no provable engine's, and waits for a person (``pulumi cancel``).
The database itself is behind ``leasedb``.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.state import backends, fencing, leasedb
from infercrane_pulumi.automation.state.leasedb import CLIENT_TIMEOUT_MS
from infercrane_pulumi.errors import BackendUnavailableError, StackBusyError

HEARTBEAT_SECONDS = 1.0
# A previous holder that lost its lease has stopped its engine this long after losing it.
FENCE_SECONDS = HEARTBEAT_SECONDS + CLIENT_TIMEOUT_MS / 1000 + 1.0


@dataclass
class Lease:
    """One stack's lease, held by this process's connection until released or lost."""

    stack_name: str
    connection: leasedb.Connection = field(repr=False)
    key: int = 0  # the advisory lock's key (``backends.lease_key``)
    acquired: float = field(default_factory=time.monotonic)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    lost: threading.Event = field(default_factory=threading.Event)

    def alive(self) -> bool:
        """Ask the server now; a lease found lost stops the run's processes at once."""
        if not self.lost.is_set() and leasedb.answers(self.connection, CLIENT_TIMEOUT_MS / 1000):
            return True
        self.lost.set()
        fencing.stop(self.token)
        return False

    @property
    def variables(self) -> dict[str, str]:
        """The run's marker: every process of the run carries it, so losing the lease stops them."""
        return {fencing.MARKER_ENV: self.token}

    def fence(self) -> None:
        """Wait until a previous holder's run has surely stopped (see ``FENCE_SECONDS``)."""
        time.sleep(max(0.0, self.acquired + FENCE_SECONDS - time.monotonic()))

    def check(self) -> None:
        """Raise ``BackendUnavailableError`` if the lease is lost (asking the server now)."""
        if not self.alive():
            raise lost(self.stack_name)

    def started(self, pid: int) -> None:
        """Record an engine this holder started (``engine.process.Tracker``)."""
        subject = f"lease of stack {self.stack_name}"
        leasedb.record_engine(self.connection, self.key, socket.gethostname(), pid, subject)

    def ended(self, pid: int) -> None:
        """The engine ended by itself, and its lock with it: forget it (a pid is reused)."""
        subject = f"lease of stack {self.stack_name}"
        leasedb.forget_engine(self.connection, self.key, socket.gethostname(), pid, subject)

    def engines(self) -> frozenset[tuple[str, int]]:
        """Every engine a holder of this lease started and did not see end (host, pid)."""
        return leasedb.engines(self.connection, self.key, f"lease of stack {self.stack_name}")


_held: dict[tuple[int, int], Lease] = {}  # (thread, key) -> the lease that thread holds


@contextlib.contextmanager
def held(env: PulumiEnvironment, stack_name: str, wait_seconds: float) -> Iterator[Lease | None]:
    """The stack's lease for the body (None: this backend has none), taken at once or within
    ``wait_seconds`` (else ``StackBusyError``), released at the end. Re-entrant per thread."""
    database = env.lease_database
    if database is None:
        yield None
        return
    key = backends.lease_key(env.backend, stack_name)
    mine = (threading.get_ident(), key)
    if mine in _held:
        yield _held[mine]
        return
    subject = f"lease of stack {stack_name}"
    connection = leasedb.connect(database)
    try:
        try:
            leasedb.try_lock(connection, key, wait_seconds=wait_seconds, subject=subject)
        except leasedb.Refused:
            raise StackBusyError(
                f"stack {stack_name}: another replica holds its lease"
                + (f" (waited {wait_seconds:.0f}s)" if wait_seconds > 0 else "")
            ) from None
        leasedb.prepare_engines(connection, subject)
        lease = Lease(stack_name, connection, key)
        done = threading.Event()
        keeper = threading.Thread(
            target=_keep, args=(lease, done), name=f"lease-{stack_name}", daemon=True
        )
        _held[mine] = lease
        keeper.start()
        try:
            yield lease
        finally:
            del _held[mine]
            done.set()
            keeper.join()
            if not lease.lost.is_set():
                leasedb.unlock(connection, key)
    finally:
        connection.close()


def lost(stack_name: str) -> BackendUnavailableError:
    return BackendUnavailableError(
        f"stack {stack_name}: lost its lease (the lease database went away); the run was "
        "stopped before writing more; retry"
    )


def _keep(lease: Lease, done: threading.Event) -> None:
    """Heartbeat the lease; once lost, its run is stopped before anyone else may run."""
    while not done.wait(HEARTBEAT_SECONDS) and lease.alive():
        pass
