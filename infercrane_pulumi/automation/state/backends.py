"""Backend URLs as values: which DIY backend a URL names, the URL Pulumi may see, the secret it
must not, and a form fit for messages.

A PostgreSQL URL's password never travels inside the URL past this module: ``database`` moves it
out, the engine gets it as ``PGPASSWORD`` (its driver reads that variable) and the lease gives it
to the client library as a parameter, so no command line, log line, error or state file can hold
it. ``redact`` is for any URL a message might show. Pure: no I/O, no client library.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from urllib.parse import SplitResult, parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from infercrane_pulumi.errors import ConfigError

POSTGRES_SCHEME = "postgres"  # the only spelling Pulumi's DIY registry serves
DEFAULT_TABLE = "pulumi_state"  # Pulumi's own default for the ``table`` parameter
REDACTED = "***"
# What a URL may say of TLS: libpq's and lib/pq's modes that never fall back to plain text, and
# ``disable``, which says so. Unsaid: ``require`` (a Unix socket's host: none, it has no TLS).
SSL_MODES = ("verify-full", "verify-ca", "require", "disable")
# A query parameter that may carry a password (libpq's password, sslpassword): its value and
# all after it, since an unencoded '&' or '#' in the password would end it early.
_QUERY_SECRET = re.compile(r"([?&][^=&#]*pass[^=&#]*=).*", re.IGNORECASE | re.DOTALL)
_MASKED = rf"\g<1>{REDACTED}"
_SECRETIVE = re.compile(r"@|pass", re.IGNORECASE)
# Pulumi interpolates ``table`` into its SQL: only (schema-qualified) identifiers pass.
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?")


@dataclass(frozen=True)
class Database:
    """A PostgreSQL database named by a ``postgres://`` URL, its password kept apart."""

    url: str  # without its password; Pulumi's own ``table`` parameter kept
    password: str | None = field(default=None, repr=False)

    @property
    def table(self) -> str:
        return dict(parse_qsl(urlsplit(self.url).query)).get("table", DEFAULT_TABLE)

    @property
    def conninfo(self) -> str:
        """The URL for a libpq client: Pulumi's ``table`` parameter is not libpq's."""
        parts = urlsplit(self.url)
        query = [(k, v) for k, v in parse_qsl(parts.query) if k != "table"]
        return urlunsplit(parts._replace(query=urlencode(query)))


def database(url: str) -> Database:
    """The database a ``postgres://`` URL names; ``ConfigError`` (never quoting the password)
    when the URL is not one Pulumi and libpq would both accept."""
    shown = redact(url)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ConfigError(f"backend URL {shown}: not a valid URL (host or port)") from None
    problems = []
    if parts.scheme != POSTGRES_SCHEME:
        problems.append(f"backend URL {shown}: the scheme must be {POSTGRES_SCHEME}://")
    if parts.fragment or "#" in url:
        problems.append(
            f"backend URL {shown}: holds a '#' (a password's '#', '/', '?' or '@' must be "
            "percent-encoded: %23, %2F, %3F, %40)"
        )
    query = dict(parse_qsl(parts.query))
    if not (parts.hostname or query.get("host")):
        problems.append(f"backend URL {shown}: no host")
    if port == 0:
        problems.append(f"backend URL {shown}: port 0")
    if not parts.path.strip("/"):
        problems.append(f"backend URL {shown}: no database (postgres://user@host/<database>)")
    if not _TABLE.fullmatch(query.get("table", DEFAULT_TABLE)):
        problems.append(f"backend URL {shown}: table must be an SQL identifier")
    mode = query.get("sslmode")
    if mode is not None and mode not in SSL_MODES:
        problems.append(
            f"backend URL {shown}: sslmode={mode} may send the password and the state in plain "
            f"text; give one of {', '.join(SSL_MODES)} (disable only on purpose)"
        )
    if problems:
        raise ConfigError(problems)
    password = None if parts.password is None else unquote(parts.password)
    if "password" in query:  # libpq's own parameter: moved out of the URL all the same
        password = password or query["password"]
        kept = [(k, v) for k, v in parse_qsl(parts.query) if k != "password"]
        parts = parts._replace(query=urlencode(kept))
    if mode is None and not (parts.hostname or query["host"]).startswith("/"):
        # Pulumi's driver (lib/pq) requires TLS when the URL says nothing, libpq (the lease's)
        # only prefers it and falls back to plain text: both are told to require it.
        parts = parts._replace(query="&".join(filter(None, [parts.query, "sslmode=require"])))
    return Database(url=urlunsplit(parts._replace(netloc=_netloc(parts, None))), password=password)


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme == POSTGRES_SCHEME


def redact(url: str) -> str:
    """``url`` with every password it may hold replaced, for messages: its userinfo's, whatever
    characters that holds (an unencoded ``#``, ``/``, ``?`` or ``@`` included: all between the
    scheme and the last ``@`` is userinfo), and, from the first query parameter whose name holds
    ``pass`` (``password=``, ``sslpassword=``), all that follows its ``=``. Without ``://``:
    the scheme only, if any ``@`` or ``pass`` could hide a secret."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return f"{url.split(':', 1)[0]}://{REDACTED}" if _SECRETIVE.search(url) else url
    at = rest.rfind("@")
    if at >= 0:
        user, colon, _ = rest[:at].partition(":")
        rest = f"{user}:{REDACTED}@{rest[at + 1 :]}" if colon else rest
    return f"{scheme}://{_QUERY_SECRET.sub(_MASKED, rest)}"


def lease_key(backend: str, stack_name: str) -> int:
    """The advisory-lock key of one stack of one backend: a signed 64-bit integer.

    One state, one key, however its URL is spelt. A PostgreSQL backend's leases live in its own
    database, so its identity is its table, in lower case as Pulumi's unquoted SQL folds it:
    two replicas that spell the host or the table's case differently still meet on one key.
    Any other backend is named by its scheme, bucket and prefix (lower-case host, no user, no
    query, no empty path segment nor trailing slash: ``s3://b/p`` and ``s3://B/p/`` are one
    state), its leases living in the lease database the replicas share."""
    parts = urlsplit(backend)
    if parts.scheme == POSTGRES_SCHEME:
        identity = f"{POSTGRES_SCHEME}:{Database(backend).table.lower()}"
    else:
        prefix = "/".join(segment for segment in parts.path.split("/") if segment)
        identity = f"{parts.scheme.lower()}://{(parts.hostname or '').lower()}/{prefix}"
    digest = hashlib.sha256(f"{identity}\0{stack_name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _netloc(parts: SplitResult, password: str | None) -> str:
    """The URL's user and host (its user exactly as written), with ``password`` if given."""
    userinfo, _, host = parts.netloc.rpartition("@")
    if not userinfo:
        return host
    user = userinfo.split(":", 1)[0]
    return f"{user}:{password}@{host}" if password is not None else f"{user}@{host}"
