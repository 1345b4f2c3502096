"""The throwaway state stores: each starts on loopback only, keeps its data across a restart,
and leaves no process or directory behind."""

from __future__ import annotations

import http.client
import os
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import psycopg
import pytest

from infercrane_dev.localcluster.processes import is_alive
from infercrane_dev.statestores import postgres, s3
from infercrane_dev.toolchain import BinaryNotFoundError, find_binary


def test_postgres_initdb_per_server_password_auth_loopback_tls_only_and_nothing_left() -> None:
    try:
        server = postgres.create()
    except postgres.PostgresUnavailable as missing:
        if os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
            pytest.fail(str(missing))
        pytest.skip(str(missing))
    try:
        server.start()
        assert server.process is not None
        pid = server.process.pid
        assert (server.directory.stat().st_mode & 0o777) == 0o700
        assert server.password not in server.url and server.password not in repr(server)
        with server.connect() as admin:
            admin.execute("CREATE TABLE kept (n int)")
            admin.execute("INSERT INTO kept VALUES (1)")
            listening = admin.execute("SHOW listen_addresses").fetchone()
            sockets = admin.execute("SHOW unix_socket_directories").fetchone()
        assert (listening, sockets) == (("127.0.0.1",), ("",))
        # Its certificate verified by its own CA (the URL says verify-full); plain text refused.
        assert dict(parse_qsl(urlsplit(server.url).query)) == {
            "sslmode": "verify-full",
            "sslrootcert": str(server.ca),
        }
        with pytest.raises(psycopg.OperationalError, match="no encryption"):
            psycopg.connect(
                host="127.0.0.1",
                port=server.port,
                user=postgres.SUPERUSER,
                password=server.password,
                dbname=postgres.DATABASE,
                sslmode="disable",
            )
        server.restart()
        with server.connect() as admin:
            assert admin.execute("SELECT n FROM kept").fetchall() == [(1,)]
    finally:
        server.remove()
    assert not is_alive(pid)
    assert not server.directory.exists()


def _require_versitygw() -> None:
    """Skip, saying why, where versitygw is not built; fail instead in CI."""
    try:
        find_binary("versitygw")
    except BinaryNotFoundError as missing:
        if os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
            pytest.fail(str(missing))
        pytest.skip(f"{missing}; run `make tools`")


def test_s3_server_serves_its_bucket_on_loopback_and_leaves_nothing() -> None:
    _require_versitygw()
    with s3.running() as server:
        assert server.process is not None
        pid, directory = server.process.pid, Path(server.directory)
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        connection.request("GET", f"/{s3.BUCKET}")
        status = connection.getresponse().status
        connection.close()
        assert status == 403  # the bucket exists and answers only signed requests
        assert server.secret_key not in server.url and server.secret_key not in repr(server)
    assert not is_alive(pid)
    assert not directory.exists()


def test_s3_server_keeps_the_lock_prefix_that_runs_of_several_stacks_share() -> None:
    """versitygw removes the directories a delete leaves empty, and a put creating one of them
    at that moment answers 409: the prefix every stack's lock directory sits in stays."""
    _require_versitygw()
    with s3.running() as server:
        bucket = server.root / s3.BUCKET
        for prefix in (s3.KEPT_PREFIX, "elsewhere/"):
            lock = f"{prefix}some-stack/a-lock.json"
            assert server.request("PUT", lock) == 200
            assert (bucket / lock).is_file()
            assert server.request("DELETE", lock) == 204
        # The stack's emptied directory goes in both; above it, only the kept prefix stays.
        assert not (bucket / s3.KEPT_PREFIX / "some-stack").exists()
        assert (bucket / s3.KEPT_PREFIX).is_dir()
        assert not (bucket / "elsewhere").exists()
