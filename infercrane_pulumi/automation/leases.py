"""Stack leases in PostgreSQL: at most one live replica runs a stack, and a replica that dies
gives its stacks up with its connection.

Pulumi's DIY locks have no lease: a replica that dies mid-run leaves its lock for ever, and
only a lock taken on this host can be proven dead (``locks``). A lease is a session-level
advisory lock (``pg_advisory_lock``) on one connection, keyed by backend and stack
(``backends.lease_key``); PostgreSQL releases it when that connection ends, whatever ended it.
Holding it proves that no live replica runs the stack, so a Pulumi lock found under it is stale
and may be broken from any host (``run``), once ``FENCE_SECONDS`` have passed since the lease
was taken: by then a previous holder that lost its lease has stopped its engine (below).

The failure model (README, "State, locks, concurrency"):

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
keepalives, which resumes and writes before its next heartbeat; and a writer that takes no
lease (a person's ``pulumi up`` on the same backend), whose live lock would be broken.
The only importer of ``psycopg``.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import TupleRow

from infercrane_pulumi.automation import backends, fencing
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.errors import (
    BackendRefusedError,
    BackendUnavailableError,
    InferCraneError,
    StackBusyError,
)

HEARTBEAT_SECONDS = 1.0
CLIENT_TIMEOUT_MS = 3000  # libpq: a heartbeat unanswered this long fails (tcp_user_timeout)
CONNECT_SECONDS = 5
# The server gives a silent session (and its lease) up after idle + count x interval seconds.
SERVER_KEEPALIVES: Mapping[str, int] = {
    "tcp_keepalives_idle": 5,
    "tcp_keepalives_interval": 2,
    "tcp_keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}
# A previous holder that lost its lease has stopped its engine this long after losing it.
FENCE_SECONDS = HEARTBEAT_SECONDS + CLIENT_TIMEOUT_MS / 1000 + 1.0
Connection = psycopg.Connection[TupleRow]
_CLIENT: Mapping[str, Any] = {
    "application_name": "infercrane-lease",
    "autocommit": True,
    "connect_timeout": CONNECT_SECONDS,
    "keepalives": 1,
    "keepalives_idle": 1,
    "keepalives_interval": 1,
    "keepalives_count": 3,
    "tcp_user_timeout": CLIENT_TIMEOUT_MS,
}


@dataclass
class Lease:
    """One stack's lease, held by this process's connection until released or lost."""

    stack_name: str
    connection: Connection = field(repr=False)
    acquired: float = field(default_factory=time.monotonic)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    lost: threading.Event = field(default_factory=threading.Event)

    def alive(self) -> bool:
        """Ask the server now; a lease found lost stops the run's processes at once."""
        if not self.lost.is_set() and _answers(self.connection, CLIENT_TIMEOUT_MS / 1000):
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
    connection = connect(database)
    try:
        _acquire(connection, key, stack_name, wait_seconds)
        lease = Lease(stack_name, connection)
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
                with contextlib.suppress(psycopg.Error):
                    connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        connection.close()


def connect(database: backends.Database) -> Connection:
    """A connection to the lease database; every failure a one-line typed error."""
    shown = backends.redact(database.url)
    try:
        connection = psycopg.connect(database.conninfo, password=database.password, **_CLIENT)
    except psycopg.Error as error:
        raise _connect_error(error, shown) from None
    try:
        for name, value in SERVER_KEEPALIVES.items():
            connection.execute("SELECT set_config(%s, %s, false)", (name, str(value)))
    except psycopg.Error as error:
        connection.close()
        raise _query_error(error, shown) from None
    return connection


def probe(database: backends.Database, *, state: bool) -> None:
    """Raise the typed error a run on this database would meet, before anything is written:
    unreachable, refused, or (``state``: it holds the Pulumi state too) a state table that is
    missing and that we may not create."""
    shown = backends.redact(database.url)
    with connect(database) as connection:
        if not state:
            return
        try:
            found = connection.execute("SELECT to_regclass(%s) IS NOT NULL", (database.table,))
            exists = bool(_one(found))
            may_create = connection.execute(
                "SELECT has_schema_privilege(current_schema(), 'CREATE')"
            )
            if not exists and not _one(may_create):
                raise BackendRefusedError(
                    f"backend {shown}: table {database.table} is missing and this role may "
                    "not create it"
                )
        except psycopg.Error as error:
            raise _query_error(error, shown) from None


def lost(stack_name: str) -> BackendUnavailableError:
    return BackendUnavailableError(
        f"stack {stack_name}: lost its lease (the lease database went away); the run was "
        "stopped before writing more; retry"
    )


def _acquire(
    connection: Connection,
    key: int,
    stack_name: str,
    wait_seconds: float,
) -> None:
    busy = StackBusyError(
        f"stack {stack_name}: another replica holds its lease"
        + (f" (waited {wait_seconds:.0f}s)" if wait_seconds > 0 else "")
    )
    try:
        if wait_seconds <= 0:
            if not _one(connection.execute("SELECT pg_try_advisory_lock(%s)", (key,))):
                raise busy
            return
        # Waits in the server: woken the moment the holder's session ends.
        timeout = f"{max(1, int(wait_seconds * 1000))}ms"
        connection.execute("SELECT set_config('lock_timeout', %s, false)", (timeout,))
        connection.execute("SELECT pg_advisory_lock(%s)", (key,))
        connection.execute("SELECT set_config('lock_timeout', '0', false)")
    except psycopg.errors.LockNotAvailable:
        raise busy from None
    except psycopg.Error as error:
        raise _query_error(error, f"lease of stack {stack_name}") from None


def _keep(lease: Lease, done: threading.Event) -> None:
    """Heartbeat the lease; once lost, its run is stopped before anyone else may run."""
    while not done.wait(HEARTBEAT_SECONDS) and lease.alive():
        pass


def _answers(connection: Connection, timeout: float) -> bool:
    """Whether the server answers a query within ``timeout``. The query runs in a thread of
    its own: a connection that TCP still believes open (a middlebox swallowing packets) may
    never answer, and the caller must not wait for it. Such a thread ends when the
    connection is closed."""
    answered: list[bool] = []
    finished = threading.Event()

    def ask() -> None:
        try:
            connection.execute("SELECT 1")
            answered.append(True)
        except psycopg.Error:
            pass
        finally:
            finished.set()

    threading.Thread(target=ask, name="lease-heartbeat", daemon=True).start()
    return finished.wait(timeout) and bool(answered)


def _one(cursor: psycopg.Cursor[TupleRow]) -> object:
    row = cursor.fetchone()
    return None if row is None else row[0]


def _connect_error(error: psycopg.Error, shown: str) -> InferCraneError:
    """Decided by what the server did, not by its text (which may be translated): a server
    that asked for our password reached authentication, so its refusal is about us (the
    password, the user, the database); anything earlier (no answer, starting up, shutting
    down, full) is the server being unavailable. Never the client's message: it may quote
    the connection's parameters."""
    connection = getattr(error, "pgconn", None)
    authenticated = connection is not None and (
        connection.used_password or connection.needs_password
    )
    if authenticated:
        return BackendRefusedError(
            f"backend {shown}: refused the connection (wrong user or password, missing "
            "database, or not allowed)"
        )
    return BackendUnavailableError(
        f"backend {shown}: unreachable, or not accepting sessions (starting, stopping, full)"
    )


def _query_error(error: psycopg.Error, subject: str) -> InferCraneError:
    if isinstance(error, psycopg.errors.InsufficientPrivilege):
        return BackendRefusedError(f"{subject}: permission denied")
    return BackendUnavailableError(f"{subject}: the database failed ({type(error).__name__})")
