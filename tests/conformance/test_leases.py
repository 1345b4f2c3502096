"""Stack leases against the session's real PostgreSQL, and bad backend input through the
command line: what ``leases`` promises, measured (no cluster needed).

A lease dies with its holder's connection; a waiter gets it the moment the holder's process
dies; a holder whose lease is lost (its session terminated, or the database silent behind a
frozen link) stops every process of its run within the heartbeat's bound, while the server
still holds the lease for it; a bad URL, password, database or table is one line with its
exit code, and the password is never echoed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from infercrane_dev.localcluster.ports import LOOPBACK, free_port
from infercrane_dev.statestores.postgres import PostgresServer
from infercrane_dev.statestores.s3 import S3Server
from infercrane_pulumi import automation, errors
from infercrane_pulumi.automation import project, stacks
from infercrane_pulumi.automation.state import backends, fencing, leasedb, leases
from infercrane_pulumi.errors import (
    BackendRefusedError,
    BackendUnavailableError,
    InferCraneError,
    StackBusyError,
)
from tests.conformance.harness import ENGINE_BINARIES, IMAGE, ROOT, require_toolchain, show
from tests.conformance.proxy import CuttableProxy

pytestmark = pytest.mark.conformance


def environment(url: str, tmp_path: Path) -> automation.PulumiEnvironment:
    return automation.PulumiEnvironment.for_backend(
        url, pulumi_home=tmp_path / "home", passphrase="conformance-only"
    )


@pytest.fixture
def env(postgres_server: PostgresServer, tmp_path: Path) -> automation.PulumiEnvironment:
    return environment(postgres_server.url_with_password, tmp_path)


def holding(url: str, stack: str) -> subprocess.Popen[str]:
    """Another process holding ``stack``'s lease (it prints once it does)."""
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from infercrane_pulumi.automation.state import leases\n"
        "from tests.conformance.test_leases import environment\n"
        "with leases.held(environment(sys.argv[1], Path('/nonexistent')), sys.argv[2], 0):\n"
        "    print('held', flush=True)\n"
        "    time.sleep(600)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, url, stack], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    return process


def elsewhere(server: PostgresServer, tmp_path: Path, stack: str) -> str:
    """What another thread taking ``stack``'s lease at once meets: "held" or an error code."""
    met: list[str] = []

    def take() -> None:
        try:
            with leases.held(environment(server.url_with_password, tmp_path), stack, 0):
                met.append("held")
        except InferCraneError as error:
            met.append(error.code)

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return met[0]


def marked_sleeper(lease: leases.Lease) -> subprocess.Popen[bytes]:
    """A stand-in for the run's engine: a process carrying the lease's marker."""
    return subprocess.Popen(["sleep", "600"], env=os.environ | lease.variables)


def test_a_file_backend_has_no_lease(tmp_path: Path) -> None:
    with leases.held(environment(tmp_path.as_uri(), tmp_path), "s", 0) as lease:
        assert lease is None


def test_busy_at_once_or_after_waiting_and_free_the_moment_the_holder_dies(
    env: automation.PulumiEnvironment, postgres_server: PostgresServer, pytestconfig: pytest.Config
) -> None:
    holder = holding(postgres_server.url_with_password, "contended")
    try:
        with pytest.raises(StackBusyError) as busy, leases.held(env, "contended", 0):
            pass
        assert busy.value.problems == ("stack contended: another replica holds its lease",)
        started = time.monotonic()
        with pytest.raises(StackBusyError), leases.held(env, "contended", 1.0):
            pass
        assert time.monotonic() - started >= 1.0
        assert elsewhere(postgres_server, env.pulumi_home, "another-stack") == "held"

        def kill_soon() -> None:
            time.sleep(1.0)
            holder.kill()

        threading.Thread(target=kill_soon).start()
        started = time.monotonic()
        with leases.held(env, "contended", 30) as lease:
            waited = time.monotonic() - started
            assert lease is not None
            with leases.held(env, "contended", 0) as again:  # re-entrant in one thread
                assert again is lease
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    assert 1.0 <= waited < 2.0
    show(pytestconfig, f"lease: a waiter held it {waited - 1.0:.3f}s after its holder was killed")


def test_a_terminated_session_stops_the_run_and_fails_retryably(
    env: automation.PulumiEnvironment, postgres_server: PostgresServer
) -> None:
    with leases.held(env, "terminated", 0) as lease:
        assert lease is not None
        engine = marked_sleeper(lease)
        with postgres_server.connect() as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = 'infercrane-lease'"
            )
        started = time.monotonic()
        engine.wait(timeout=leases.HEARTBEAT_SECONDS + leasedb.CLIENT_TIMEOUT_MS / 1000 + 2)
        stopped = time.monotonic() - started
        with pytest.raises(BackendUnavailableError) as lost:
            lease.check()
    assert engine.returncode == -9
    assert stopped <= leases.HEARTBEAT_SECONDS + 1
    assert lost.value.retryable
    assert fencing.marked(lease.token) == []


def test_a_holder_behind_a_silent_link_stops_its_run_before_the_server_frees_the_lease(
    postgres_server: PostgresServer, tmp_path: Path, pytestconfig: pytest.Config
) -> None:
    proxy = CuttableProxy(LOOPBACK, postgres_server.port).start()
    url = postgres_server.url_with_password.replace(f":{postgres_server.port}/", f":{proxy.port}/")
    try:
        with leases.held(environment(url, tmp_path), "partitioned", 0) as lease:
            assert lease is not None
            engine = marked_sleeper(lease)
            proxy.freeze()  # the database falls silent; every connection stays open
            frozen = time.monotonic()
            engine.wait(timeout=30)
            stopped = time.monotonic() - frozen
            # The server still holds the lease for the holder: nobody else could have run.
            assert elsewhere(postgres_server, tmp_path, "partitioned") == "stack-busy"
    finally:
        proxy.cut()
    bound = leases.HEARTBEAT_SECONDS + leasedb.CLIENT_TIMEOUT_MS / 1000
    assert engine.returncode == -9 and stopped <= bound + 1
    show(pytestconfig, f"lease: a holder behind a silent link stopped its run {stopped:.1f}s after")


def test_probe_names_each_bad_backend_in_one_line_without_the_password(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a refusal is classified by is what the server did, so the server must get to do it:
    # in a cold `.ci/run`, beside the toolchain's builds, a wrong password came back as
    # "unreachable" once, the likeliest cause a session not forked and answering within the
    # run's 5 s connect timeout (which is then rightly "unavailable", retryable).
    monkeypatch.setattr(leasedb, "_CLIENT", {**leasedb._CLIENT, "connect_timeout": 60})
    password = postgres_server.password
    good = backends.database(postgres_server.url_with_password)
    with postgres_server.connect() as admin:
        admin.execute(f"CREATE ROLE reader LOGIN PASSWORD '{password}'")
        admin.execute("CREATE DATABASE locked")
        admin.execute("REVOKE CREATE ON DATABASE locked FROM PUBLIC")
    with postgres_server.connect("locked") as locked:
        locked.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")

    def refusal(url: str) -> InferCraneError:
        with pytest.raises(InferCraneError) as refused:
            leasedb.probe(backends.database(url), state=True)
        assert password not in str(refused.value)
        assert len(refused.value.problems) == 1
        return refused.value

    shown = f"postgres://infercrane@{LOOPBACK}"  # the URL as given, without its password
    wrong = refusal(good.url.replace("infercrane@", "infercrane:wrong@"))
    assert isinstance(wrong, BackendRefusedError)
    missing = refusal(postgres_server.url_with_password.replace("/infercrane?", "/nodb?"))
    assert isinstance(missing, BackendRefusedError)
    closed = refusal(
        postgres_server.url_with_password.replace(str(postgres_server.port), str(free_port()))
    )
    assert isinstance(closed, BackendUnavailableError) and closed.retryable
    reader = postgres_server.url_with_password.replace("infercrane:", "reader:").replace(
        "/infercrane?", "/locked?"
    )
    table = refusal(reader)
    assert table.problems == (
        f"backend {backends.database(reader).url}: table pulumi_state is missing and this role may "
        "not create it",
    )
    assert wrong.problems[0].startswith(f"backend {shown}")


@pytest.fixture
def stack_dir(tmp_path: Path) -> Iterator[Path]:
    """A project with one valid stack file: the backend fails before anything reads it."""
    stacks = tmp_path / "project" / "stacks"
    stacks.mkdir(parents=True)
    document = {
        "config": {
            "infercrane:kubernetes": {"context": "c", "namespace": "n", "imageDigest": IMAGE},
            "infercrane:replicas": [],
        }
    }
    (stacks / "Pulumi.bad.yaml").write_text(yaml.safe_dump(document))
    yield tmp_path / "project"


BAD_BACKENDS = {
    "malformed": ("invalid-config", errors.EXIT_INVALID),
    "unreachable": ("backend-unavailable", errors.EXIT_UNAVAILABLE),
    "wrong password": ("backend-refused", errors.EXIT_FAILED),
    "missing database": ("backend-refused", errors.EXIT_FAILED),
}


@pytest.mark.parametrize("case", sorted(BAD_BACKENDS))
def test_a_bad_backend_is_one_line_and_its_exit_code_and_writes_nothing(
    case: str,
    postgres_server: PostgresServer,
    stack_dir: Path,
    tmp_path: Path,
) -> None:
    good = postgres_server.url_with_password
    url = {
        "malformed": good.replace(f":{postgres_server.port}/", ":99999/"),
        "unreachable": good.replace(str(postgres_server.port), str(free_port())),
        "wrong password": good.replace(postgres_server.password, "not-the-password"),
        "missing database": good.replace("/infercrane?", "/nodb?"),
    }[case]
    code, exit_code = BAD_BACKENDS[case]
    secret = url.split(":")[2].split("@")[0]
    environ = os.environ | {
        "PULUMI_BACKEND_URL": url,
        "PULUMI_CONFIG_PASSPHRASE": "conformance-only",
        "PULUMI_HOME": str(tmp_path / "home"),
        "INFERCRANE_TOOLS_BIN": str(require_toolchain(ENGINE_BINARIES)),
    }
    for output in ("--json", None):
        done = subprocess.run(
            [sys.executable, "-m", "infercrane_pulumi", "up", "--stack", "bad"]
            + ["--project-dir", str(stack_dir)]
            + ([output] if output else []),
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == exit_code, done.stderr
        assert secret not in done.stdout + done.stderr
        if output:
            assert json.loads(done.stdout)["error"]["code"] == code
        else:
            assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
    with postgres_server.connect() as admin:
        found = admin.execute("SELECT to_regclass('pulumi_state') IS NOT NULL").fetchone()
        if found and found[0]:
            written = admin.execute("SELECT key FROM pulumi_state WHERE key LIKE '%%/bad%%'")
            assert written.fetchall() == []


@pytest.mark.parametrize("kind", ["postgres", "s3"])
def test_replicas_creating_one_stack_at_once_all_get_it(
    kind: str, request: pytest.FixtureRequest, postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Pulumi's create is look-then-write: on a shared backend, replicas opening a new stack at
    once met "already exists", "locked" or a bare failure (found by ensure_many on S3)."""
    bin_dir = require_toolchain(ENGINE_BINARIES)
    if kind == "postgres":
        url, lease_url, variables = postgres_server.url_with_password, None, {}
    else:
        bucket: S3Server = request.getfixturevalue("s3_server")
        url, lease_url, variables = bucket.url, postgres_server.url_with_password, bucket.variables
    opened: list[str] = []

    def open_one(index: int) -> None:
        env = automation.PulumiEnvironment.for_backend(
            url,
            lease_url=lease_url,
            pulumi_home=tmp_path / f"home-{index}",
            passphrase="conformance-only",
            bin_dir=bin_dir,
            backend_variables=variables,
        )
        workspace = project.write_project(tmp_path / f"workspace-{index}")
        try:
            opened.append(stacks.open_stack("created-at-once", project_dir=workspace, env=env).name)
        except InferCraneError as error:
            opened.append(error.code)

    threads = [threading.Thread(target=open_one, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert opened == ["created-at-once"] * 3
