"""The lease database's door: the only importer of ``psycopg``; also the door to a PostgreSQL
backend's state table, for pruning its history (``retention``).

Connections tuned so that a lost peer is noticed in seconds on both sides (client keepalives
and a user timeout; the server's per-session keepalives), the advisory-lock statements a lease
is made of, a query that must answer within a deadline, and every failure as a one-line typed
error decided by what the server did, never by its text and never with the URL's password.
The lease protocol itself (who may run a stack, heartbeats, fencing) is ``leases``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from infercrane_pulumi.automation.state import backends
from infercrane_pulumi.errors import (
    BackendRefusedError,
    BackendUnavailableError,
    InferCraneError,
)

CLIENT_TIMEOUT_MS = 3000  # libpq: a heartbeat unanswered this long fails (tcp_user_timeout)
CONNECT_SECONDS = 5
# The server gives a silent session (and its lease) up after idle + count x interval seconds.
SERVER_KEEPALIVES: Mapping[str, int] = {
    "tcp_keepalives_idle": 5,
    "tcp_keepalives_interval": 2,
    "tcp_keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}
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


class Refused(Exception):
    """The advisory lock was not had: held by another session (at once, or within the wait)."""


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


def answers(connection: Connection, timeout: float) -> bool:
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


def try_lock(connection: Connection, key: int, *, wait_seconds: float, subject: str) -> None:
    """Take the session-level advisory lock ``key``: at once, or waiting in the server (woken
    the moment its holder's session ends) up to ``wait_seconds``; ``Refused`` if not had."""
    try:
        if wait_seconds <= 0:
            if not _one(connection.execute("SELECT pg_try_advisory_lock(%s)", (key,))):
                raise Refused
            return
        timeout = f"{max(1, int(wait_seconds * 1000))}ms"
        connection.execute("SELECT set_config('lock_timeout', %s, false)", (timeout,))
        connection.execute("SELECT pg_advisory_lock(%s)", (key,))
        connection.execute("SELECT set_config('lock_timeout', '0', false)")
    except psycopg.errors.LockNotAvailable:
        raise Refused from None
    except psycopg.Error as error:
        raise _query_error(error, subject) from None


# The engines each lease holder started, by host and pid: a lock one of them left is provably
# its (the engine carried the lease's mark, and the fence stopped it); any other lock is not.
ENGINES_TABLE = "infercrane_lease_engines"


def prepare_engines(connection: Connection, subject: str) -> None:
    """The table of the engines lease holders started, made if missing."""
    statement = sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} (lease_key bigint NOT NULL, hostname text NOT NULL, "
        "pid integer NOT NULL, PRIMARY KEY (lease_key, hostname, pid))"
    ).format(sql.Identifier(ENGINES_TABLE))
    try:
        connection.execute(statement)
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
        pass  # another replica made it at the same moment
    except psycopg.Error as error:
        raise _query_error(error, subject) from None


def record_engine(connection: Connection, key: int, host: str, pid: int, subject: str) -> None:
    _engines(
        connection,
        "INSERT INTO {} VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
        subject,
        (key, host, pid),
    )


def forget_engine(connection: Connection, key: int, host: str, pid: int, subject: str) -> None:
    _engines(
        connection,
        "DELETE FROM {} WHERE lease_key = %s AND hostname = %s AND pid = %s",
        subject,
        (key, host, pid),
    )


def engines(connection: Connection, key: int, subject: str) -> frozenset[tuple[str, int]]:
    """The engines lease holders of ``key`` started and did not see end: (host, pid)."""
    rows = _engines(
        connection, "SELECT hostname, pid FROM {} WHERE lease_key = %s", subject, (key,)
    )
    return frozenset((str(host), int(pid)) for host, pid in rows)


def _engines(
    connection: Connection, statement: str, subject: str, values: tuple[object, ...]
) -> list[TupleRow]:
    query = sql.SQL(statement).format(sql.Identifier(ENGINES_TABLE))
    try:
        cursor = connection.execute(query, values)
        return cursor.fetchall() if cursor.description else []
    except psycopg.Error as error:
        raise _query_error(error, subject) from None


def unlock(connection: Connection, key: int) -> None:
    """Release the advisory lock ``key``; a connection already gone released it."""
    with contextlib.suppress(psycopg.Error):
        connection.execute("SELECT pg_advisory_unlock(%s)", (key,))


def state_keys(database: backends.Database, prefixes: Sequence[str]) -> list[str]:
    """The keys of the Pulumi state table that begin with any of ``prefixes``, in order."""
    shown = backends.redact(database.url)
    # LIKE, for the table's own index on keys (text_pattern_ops), with its wildcards escaped.
    patterns = [re.sub(r"([\\%_])", r"\\\1", prefix) + "%" for prefix in prefixes]
    statement = sql.SQL("SELECT key FROM {} WHERE key LIKE ANY(%s) ORDER BY key").format(
        _table(database)
    )
    with connect(database) as connection:
        try:
            return [str(row[0]) for row in connection.execute(statement, (patterns,))]
        except psycopg.Error as error:
            raise _query_error(error, shown) from None


def state_value(database: backends.Database, key: str) -> bytes | None:
    """The blob the Pulumi state table holds at ``key`` (None: none): its driver keeps each
    as JSON, ``{"data": <base64>}``."""
    shown = backends.redact(database.url)
    statement = sql.SQL("SELECT data FROM {} WHERE key = %s").format(_table(database))
    with connect(database) as connection:
        try:
            row = connection.execute(statement, (key,)).fetchone()
        except psycopg.Error as error:
            raise _query_error(error, shown) from None
    if row is None:
        return None
    document = row[0] if isinstance(row[0], Mapping) else json.loads(row[0])
    try:
        return base64.b64decode(document["data"])
    except (KeyError, TypeError, ValueError):
        return b""  # not a blob this reader knows: its holder cannot be named


def delete_state_keys(database: backends.Database, keys: Sequence[str]) -> None:
    """Delete these keys of the Pulumi state table, in one statement."""
    shown = backends.redact(database.url)
    statement = sql.SQL("DELETE FROM {} WHERE key = ANY(%s)").format(_table(database))
    with connect(database) as connection:
        try:
            connection.execute(statement, (list(keys),))
        except psycopg.Error as error:
            raise _query_error(error, shown) from None


def _table(database: backends.Database) -> sql.Composable:
    """The state table as Pulumi names it (``backends`` allows ``schema.table``)."""
    # Pulumi interpolates it unquoted, so PostgreSQL folds it to lower case.
    return sql.Identifier(*database.table.lower().split("."))
