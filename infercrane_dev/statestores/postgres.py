"""A throwaway PostgreSQL server: the shared state and lease database of the tests, the demo and
the benchmarks, started like every other local service.

``initdb`` into a private directory (0700, its own OS user when run as root: PostgreSQL refuses
to run as root), the server listening on a free 127.0.0.1 port only (no unix socket), password
authentication (SCRAM) for every connection, over TLS only: a CA made for the server signs its
certificate (for 127.0.0.1), and every client verifies it (``sslmode=verify-full``, as the
docs ask of a real deployment). ``stop`` shuts it down fast and removes the
directory, leaving no process or file; ``restart`` keeps the data, as a database restart does.
Debian's ``postgresql-15`` provides the binaries (``hack/host-packages.sh`` installs it). The
password is random per server and never leaves this object except as a parameter.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg.rows import TupleRow

from infercrane_dev.localcluster import certs
from infercrane_dev.localcluster.ports import LOOPBACK, free_port
from infercrane_dev.localcluster.processes import (
    ManagedProcess,
    start_process,
    stop_process,
    wait_until_ready,
)

PG_BIN = Path(os.environ.get("INFERCRANE_PG_BIN", "/usr/lib/postgresql/15/bin"))
SERVICE_USER = "postgres"  # created by Debian's postgresql-common; used only when root
SUPERUSER = "infercrane"
DATABASE = "infercrane"
READY_SECONDS = 30.0


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL binaries or their OS user are missing (say how to install them)."""


@dataclass
class PostgresServer:
    directory: Path
    port: int
    password: str = field(repr=False)
    durable: bool = False
    process: ManagedProcess | None = None

    @property
    def ca(self) -> Path:
        """The CA file a client verifies the server's certificate with."""
        return self.directory / "tls" / "ca.crt"

    @property
    def url(self) -> str:
        """The backend URL without its password (give that as ``password``, or PGPASSWORD)."""
        tls = f"sslmode=verify-full&sslrootcert={self.ca}"
        return f"postgres://{SUPERUSER}@{LOOPBACK}:{self.port}/{DATABASE}?{tls}"

    @property
    def url_with_password(self) -> str:
        return self.url.replace(f"{SUPERUSER}@", f"{SUPERUSER}:{self.password}@", 1)

    def connect(self, database: str = DATABASE) -> psycopg.Connection[TupleRow]:
        """An administrative connection (autocommit)."""
        return psycopg.connect(
            host=LOOPBACK,
            port=self.port,
            user=SUPERUSER,
            password=self.password,
            dbname=database,
            sslmode="verify-full",
            sslrootcert=str(self.ca),
            autocommit=True,
            connect_timeout=5,
        )

    def start(self) -> PostgresServer:
        """Start (again) on the same port and data directory."""
        data = self.directory / "data"
        settings = {
            "listen_addresses": LOOPBACK,
            "port": str(self.port),
            "unix_socket_directories": "",
            "max_connections": "200",
            "ssl": "on",
            "ssl_cert_file": str(self.directory / "tls" / "server.crt"),
            "ssl_key_file": str(self.directory / "tls" / "server.key"),
        }
        if not self.durable:  # tests: nothing here must survive a crash of the machine
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        argv = [str(PG_BIN / "postgres"), "-D", str(data)]
        argv += [arg for name, value in settings.items() for arg in ("-c", f"{name}={value}")]
        self.process = start_process("postgres", _as_service_user(argv), self.directory / "log")
        wait_until_ready(self.process, self._answers, timeout=READY_SECONDS)
        return self

    def stop(self) -> None:
        """Fast shutdown (sessions are disconnected, as when the database goes away)."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGINT)
            stop_process(self.process, grace=15)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _answers(self) -> bool:
        with self.connect("postgres") as admin:
            found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
            if found.fetchone() is None:
                admin.execute(f"CREATE DATABASE {DATABASE}")
        return True


def create(*, durable: bool = False) -> PostgresServer:
    """A new, stopped server: a private directory holding a fresh ``initdb``."""
    initdb = PG_BIN / "initdb"
    if not initdb.exists():
        raise PostgresUnavailable(
            f"{initdb} is missing: install Debian's postgresql-15 (hack/host-packages.sh)"
        )
    owner = _service_owner()
    directory = Path(tempfile.mkdtemp(prefix="infercrane-postgres-"))  # 0700
    try:
        password = secrets.token_urlsafe(24)
        password_file = directory / "password"
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)
        if owner is not None:
            for path in (directory, password_file):
                os.chown(path, owner.pw_uid, owner.pw_gid)
        argv = [str(initdb), "-D", str(directory / "data"), "-U", SUPERUSER]
        argv += [f"--pwfile={password_file}", "--auth=scram-sha-256", "-E", "UTF8"]
        argv += ["--no-instructions", "--no-sync", "--locale=C"]
        process = start_process("initdb", _as_service_user(argv), directory / "initdb.log")
        assert process.popen is not None
        if process.popen.wait(timeout=120) != 0:
            raise PostgresUnavailable(f"initdb failed: {process.log_tail(5)}")
        password_file.unlink()
        # TLS only: no line lets a connection in without it.
        (directory / "data" / "pg_hba.conf").write_text(
            f"hostssl all all {LOOPBACK}/32 scram-sha-256\n"
        )
        _tls(directory / "tls", owner)
        return PostgresServer(directory, free_port(), password, durable)
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise


@contextlib.contextmanager
def running(*, durable: bool = False) -> Iterator[PostgresServer]:
    """A started server, stopped and removed on exit."""
    server = create(durable=durable)
    try:
        yield server.start()
    finally:
        server.remove()


def _tls(directory: Path, owner: pwd.struct_passwd | None) -> None:
    """A CA of the server's own, and its certificate for loopback; the key readable by the
    server alone (PostgreSQL refuses one others can read)."""
    ca = certs.generate_ca("infercrane-postgres-ca")
    served = certs.issue_serving_cert(ca, "postgres", ["localhost"], [LOOPBACK])
    directory.mkdir(mode=0o755)
    files = {"ca.crt": ca.cert_pem, "server.crt": served.cert_pem, "server.key": served.key_pem}
    for name, content in files.items():
        path = directory / name
        path.write_bytes(content)
        path.chmod(0o600 if name == "server.key" else 0o644)
        if owner is not None:
            os.chown(path, owner.pw_uid, owner.pw_gid)


def _service_owner() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        raise PostgresUnavailable(
            f"no OS user {SERVICE_USER!r} to run PostgreSQL as (root may not): "
            "install Debian's postgresql-15 (hack/host-packages.sh)"
        ) from None


def _as_service_user(argv: list[str]) -> list[str]:
    """``argv`` run as the service user when root (setpriv execs: the pid stays the server's)."""
    if _service_owner() is None:
        return argv
    return ["setpriv", f"--reuid={SERVICE_USER}", f"--regid={SERVICE_USER}", "--init-groups", *argv]
