"""Several control-plane replicas on one shared backend, each its own process with its own
workspace and PULUMI_HOME (as separate hosts would be), through ``NamespaceStack``.

Each scenario runs twice: on the session's throwaway PostgreSQL (state and stack leases in one
database), and on an S3 server (versitygw over a directory) holding the state, the leases in
that PostgreSQL.
Every claim is read back as admin from the API server and from the database itself: the
replicas' own answers are what the control plane would see, never the evidence alone.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_dev.localcluster.processes import descendants
from infercrane_dev.statestores import s3
from infercrane_dev.statestores.postgres import PostgresServer
from infercrane_dev.statestores.s3 import S3Server
from infercrane_pulumi.automation.state import leases
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.backends import Tenant
from tests.conformance.harness import (
    ENGINE_BINARIES,
    IMAGE,
    ROOT,
    replica,
    require_toolchain,
    show,
    wait_for,
)
from tests.conformance.replica import Replica, SharedBackend

pytestmark = pytest.mark.conformance

PLUGINS = ROOT / ".infercrane" / "pulumi-home" / "plugins"
WAIT = 300.0  # how long a waiting replica may wait for the lease


@dataclass(frozen=True)
class Store:
    """One shared backend as the replicas see it, and what the test reads behind their back."""

    backend: SharedBackend
    all_locks: Callable[[], list[str]]  # Pulumi's lock objects, read in the store itself
    restart: Callable[[], None]  # the state server and the lease database
    stored: Callable[[], str]  # every state object's content, decoded
    leases: Callable[[bool], int]  # how many stack leases are held (True) or awaited now

    def locks(self, stacks: Sequence[str]) -> list[str]:
        """The lock objects of these stacks (a scenario's own, whatever others left)."""
        return [lock for lock in self.all_locks() if any(f"/{s}/" in lock for s in stacks)]


@pytest.fixture(params=["postgres", "s3"])
def store(request: pytest.FixtureRequest, postgres_server: PostgresServer) -> Store:
    """PostgreSQL holding the state and the leases; or an S3 server holding the state, the
    leases in the PostgreSQL the control plane already has."""
    lease_password = {"PGPASSWORD": postgres_server.password}
    if request.param == "postgres":
        return Store(
            SharedBackend(url=postgres_server.url, variables=lease_password),
            lambda: postgres_locks(postgres_server),
            postgres_server.restart,
            lambda: postgres_contents(postgres_server),
            functools.partial(lease_count, postgres_server),
        )
    bucket: S3Server = request.getfixturevalue("s3_server")

    def restart() -> None:
        postgres_server.restart()  # first: a run's lease goes at once
        bucket.stop()
        bucket.start()

    return Store(
        SharedBackend(
            url=bucket.url,
            variables=bucket.variables | lease_password,
            lease_url=postgres_server.url,
        ),
        lambda: sorted(
            str(path.relative_to(bucket.root))
            for path in (bucket.root / s3.BUCKET / ".pulumi" / "locks").rglob("*.json")
        ),
        restart,
        lambda: "".join(
            path.read_text(errors="replace") for path in bucket.root.rglob("*") if path.is_file()
        ),
        functools.partial(lease_count, postgres_server),
    )


def settings_of(tenant: Tenant) -> dict[str, Any]:
    return {
        "context": tenant.provider.context,
        "namespace": tenant.namespace,
        "imageDigest": IMAGE,
        "kubeconfig": str(tenant.provider.kubeconfig),
    }


@contextlib.contextmanager
def fleet(
    count: int, directory: Path, backend: SharedBackend, tenants: Sequence[Tenant]
) -> Iterator[list[Replica]]:
    """``count`` replica processes, each with every tenant's namespace; killed at the end."""
    bin_dir = require_toolchain(ENGINE_BINARIES)
    namespaces = {t.namespace: settings_of(t) for t in tenants}
    started: list[Replica] = []
    try:
        for index in range(count):
            started.append(
                Replica(
                    f"replica-{index}",
                    directory,
                    backend,
                    namespaces=namespaces,
                    plugins=PLUGINS,
                    bin_dir=bin_dir,
                )
            )
        yield started
    finally:
        for made in started:
            made.close()


def intents(keys: Sequence[str]) -> list[dict[str, Any]]:
    return [replica(key) for key in keys]


def owned_names(admin: Cluster, namespace: str) -> dict[str, list[str]]:
    """Every owned object's name per kind: a duplicate would show twice."""
    return {
        kind.kind: sorted(
            o["metadata"]["name"] for o in admin.select(kind, namespace, naming.OWNED_SELECTOR)
        )
        for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
    }


def expected_names(keys: Sequence[str]) -> dict[str, list[str]]:
    names = sorted(naming.object_name(key) for key in keys)
    return {kinds.DEPLOYMENT.kind: names, kinds.SERVICE.kind: names}


def lease_count(server: PostgresServer, granted: bool) -> int:
    with server.connect() as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = %s",
            (granted,),
        ).fetchone()
    return int(row[0]) if row else 0


def postgres_contents(server: PostgresServer) -> str:
    with server.connect() as admin:
        rows = admin.execute(
            "SELECT convert_from(decode(data->>'data', 'base64'), 'UTF8') FROM pulumi_state"
        ).fetchall()
    return "".join(str(row[0]) for row in rows)


def postgres_locks(server: PostgresServer) -> list[str]:
    with server.connect() as admin:
        rows = admin.execute(
            "SELECT key FROM pulumi_state WHERE key LIKE '%%.pulumi/locks/%%' ORDER BY key"
        ).fetchall()
    return [str(row[0]) for row in rows]


@pytest.fixture
def admin(admin_client: client.ApiClient) -> Cluster:
    return Cluster(RestTransport(admin_client), context="admin")


def test_two_replicas_ensuring_one_namespace_at_once_take_turns_and_lose_no_update(
    tenant: Tenant,
    admin: Cluster,
    store: Store,
    tmp_path: Path,
) -> None:
    namespace = tenant.namespace
    first = ["turns-r0", "turns-r1"]
    second = [*first, "turns-r2"]
    with fleet(2, tmp_path, store.backend, [tenant]) as (a, b):
        # One runs; the other, not waiting, is told the stack is busy (retryable).
        a.send("ensure", namespace=namespace, intents=intents(first))
        wait_for(lambda: store.leases(True) == 1, timeout=60, what="a's lease")
        busy = b.call("ensure", namespace=namespace, intents=intents(second))
        done = a.answer()
        assert busy["error"]["code"] == "stack-busy" and busy["error"]["retryable"] is True
        assert done == done | {"ok": True, "changes": dict.fromkeys(first, "create")}

        # Both at once, both waiting: they run one after the other, each from the state the
        # other left (a lost update would show both starting from the same state).
        a.send("ensure", namespace=namespace, intents=intents(second), wait=WAIT)
        b.send("ensure", namespace=namespace, intents=intents(first), wait=WAIT)
        grow, shrink = a.answer(), b.answer()
    assert grow["ok"] and shrink["ok"]
    assert grow["changes"] == dict.fromkeys(first, "same") | {"turns-r2": "create"}
    if shrink["changes"] == dict.fromkeys(first, "same") | {"turns-r2": "delete"}:
        last = first  # a ran first, b removed what a added
    else:
        assert shrink["changes"] == dict.fromkeys(first, "same")  # b ran first: nothing to do
        last = second
    assert owned_names(admin, namespace) == expected_names(last)
    assert store.locks([namespace]) == []
    # The backend's secrets reach the replicas as variables only: not in the state, nor in
    # anything a replica wrote (its spec, workspace, PULUMI_HOME, its stderr).
    variables = store.backend.variables
    secrets = [variables[k] for k in ("PGPASSWORD", "AWS_SECRET_ACCESS_KEY") if k in variables]
    written = store.stored() + "".join(
        path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file()
    )
    assert [secret for secret in secrets if secret in written] == []


def test_a_replica_killed_mid_up_is_taken_over_by_another_within_bounded_time(
    tenant: Tenant,
    admin: Cluster,
    store: Store,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    namespace = tenant.namespace
    keys = [f"killed-r{i}" for i in range(20)]
    with fleet(2, tmp_path, store.backend, [tenant]) as (a, b):
        assert b.call("observe", namespace=namespace)["observed"] == []
        a.send("ensure", namespace=namespace, intents=intents(keys))
        wait_for(lambda: store.leases(True) == 1, timeout=60, what="a's lease")
        b.send("ensure", namespace=namespace, intents=intents(keys), wait=WAIT)
        wait_for(lambda: store.leases(False) == 1, timeout=60, what="b waiting for the lease")
        wait_for(
            lambda: any(owned_names(admin, namespace).values()),
            timeout=120,
            what="the first object of the run to be killed",
        )
        locked = store.locks([namespace])  # a's engine holds Pulumi's lock
        engine = descendants(a.process.pid)
        a.kill()  # the replica and its engine, as when its host dies
        killed = time.monotonic()
        wait_for(lambda: store.leases(True) == 1, timeout=30, what="b's lease")
        leased = time.monotonic() - killed
        taken = b.answer()
        takeover = time.monotonic() - killed
    assert engine and len(locked) == 1  # the run was under way
    assert taken["ok"] is True, taken
    assert set(taken["changes"]) == set(keys)
    assert takeover >= leases.FENCE_SECONDS  # the lock was broken only after the fence
    assert owned_names(admin, namespace) == expected_names(keys)  # no duplicate
    assert store.locks([namespace]) == []  # the dead replica's lock was broken
    assert takeover < 60.0
    show(
        pytestconfig,
        f"takeover on {store.backend.url.split(':')[0]} after a replica was SIGKILLed mid-up: "
        f"the waiting replica held the lease {leased:.2f}s after the kill (polled every 0.2s) "
        f"and had converged the namespace {takeover:.1f}s after it (fence "
        f"{leases.FENCE_SECONDS:.0f}s, broken lock, the run itself)",
    )


def test_the_database_restarting_between_and_during_runs(
    tenant: Tenant,
    admin: Cluster,
    store: Store,
    tmp_path: Path,
) -> None:
    namespace = tenant.namespace
    keys = [f"restart-r{i}" for i in range(20)]
    with fleet(1, tmp_path, store.backend, [tenant]) as (a,):
        assert a.call("ensure", namespace=namespace, intents=intents(keys[:2]))["ok"]
        store.restart()  # between two runs: the next call succeeds
        after = a.call("ensure", namespace=namespace, intents=intents(keys[:3]))
        assert after["changes"] == dict.fromkeys(keys[:2], "same") | {keys[2]: "create"}

        # During a run: the run is stopped (its lease went with the database) and the
        # replica is told to retry; nothing of the stopped run keeps running.
        a.send("ensure", namespace=namespace, intents=intents(keys))
        wait_for(
            lambda: len(owned_names(admin, namespace)[kinds.DEPLOYMENT.kind]) > 3,
            timeout=120,
            what="the run to be under way",
        )
        store.restart()
        stopped = a.answer()
        assert stopped["ok"] is False
        assert stopped["error"]["code"] == "backend-unavailable"
        assert stopped["error"]["retryable"] is True
        assert descendants(a.process.pid) == set()  # the engine, program and plugins
        converged = a.call("ensure", namespace=namespace, intents=intents(keys))
        assert converged["ok"] is True, converged
        assert owned_names(admin, namespace) == expected_names(keys)
        # Now and then a Pulumi lock outlives a restart mid-run (docs/explanation/failure-model.md):
        # the next engine run, under the lease, breaks it and goes on.
        fewer = a.call("ensure", namespace=namespace, intents=intents(keys[:-1]))
    assert fewer["ok"] is True, fewer
    assert fewer["changes"] == dict.fromkeys(keys[:-1], "same") | {keys[-1]: "delete"}
    assert owned_names(admin, namespace) == expected_names(keys[:-1])
    assert store.locks([namespace]) == []


def test_ensure_many_over_20_namespaces_from_3_replicas_converges_each_once_and_observe_agrees(
    tenants: Callable[[int], list[Tenant]],
    admin: Cluster,
    store: Store,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    made = tenants(20)
    wanted = {t.namespace: [f"{t.namespace}-r0"] for t in made}
    order = list(wanted)
    with fleet(3, tmp_path, store.backend, made) as replicas:
        started = time.monotonic()
        for index, one in enumerate(replicas):
            # Split with overlaps: each replica is asked for 10 namespaces from its own start,
            # so 13 of the 20 are asked for by two replicas at once.
            share = (order * 2)[index * 7 : index * 7 + 10]
            one.send("ensure_many", namespaces={ns: intents(wanted[ns]) for ns in share})
        answers = [one.answer() for one in replicas]
        elapsed = time.monotonic() - started
        observed = [
            {ns: one.call("observe", namespace=ns)["observed"] for ns in order} for one in replicas
        ]
    creators: dict[str, int] = dict.fromkeys(order, 0)
    for answer in answers:
        for namespace, outcome in answer["outcomes"].items():
            if "error" in outcome:
                assert outcome["error"]["code"] == "stack-busy", outcome
                continue
            changes = set(outcome["changes"].values())
            assert changes in ({"create"}, {"same"}), outcome
            creators[namespace] += changes == {"create"}
    assert creators == dict.fromkeys(order, 1)  # every namespace converged exactly once
    for namespace, keys in wanted.items():
        assert owned_names(admin, namespace) == expected_names(keys)
    assert observed[0] == observed[1] == observed[2]
    assert {ns: [key for key, _ in seen] for ns, seen in observed[0].items()} == wanted
    assert store.locks(order) == []
    show(
        pytestconfig,
        f"ensure_many on {store.backend.url.split(':')[0]}: 20 namespaces from 3 replicas at "
        f"once in {elapsed:.1f}s",
    )


def plant_lock(
    request: pytest.FixtureRequest, stack: str, content: dict[str, Any]
) -> Callable[[], None]:
    """A lock of the stack as the CLI writes one, put in the store behind the replicas' back;
    what removes it."""
    name = f".pulumi/locks/organization/infercrane/{stack}/{uuid.uuid4()}.json"
    raw = json.dumps(content).encode()
    if request.node.callspec.params["store"] == "postgres":
        postgres_server: PostgresServer = request.getfixturevalue("postgres_server")
        with postgres_server.connect() as admin:
            [prefix] = {
                str(row[0]).partition(".pulumi/")[0]
                for row in admin.execute("SELECT key FROM pulumi_state").fetchall()
            }
            data = json.dumps({"data": base64.b64encode(raw).decode()})
            admin.execute(
                "INSERT INTO pulumi_state (key, data) VALUES (%s, %s)", (prefix + name, data)
            )

        def removed() -> None:
            with postgres_server.connect() as admin:
                admin.execute("DELETE FROM pulumi_state WHERE key = %s", (prefix + name,))

        return removed
    bucket: S3Server = request.getfixturevalue("s3_server")
    path = bucket.root / s3.BUCKET / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return path.unlink


def test_a_lock_no_lease_holder_left_is_never_broken_under_the_lease(
    tenant: Tenant,
    admin: Cluster,
    store: Store,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    """A person's ``pulumi up`` on the runners' state takes no lease: its live lock was broken
    under it by a replica holding the lease (two engines on one state). Now the replica breaks
    only a lock that an engine a lease holder started left, and answers stack-busy otherwise,
    the lock left as it was; once the person's run has ended, the replica goes on."""
    namespace = tenant.namespace
    with fleet(1, tmp_path, store.backend, [tenant]) as [replica_0]:
        first = replica_0.call("ensure", namespace=namespace, intents=intents(["held-a"]))
        assert first["ok"], first
        when = "2026-12-06T12:00:00Z"
        person = {"pid": 4242, "username": "someone", "hostname": "a-laptop", "timestamp": when}
        removed = plant_lock(request, namespace, person)
        blocked = replica_0.call(
            "ensure", namespace=namespace, intents=intents(["held-a", "held-b"])
        )
        assert (blocked["ok"], blocked["error"]["code"]) == (False, "stack-busy"), blocked
        [line] = blocked["error"]["problems"]
        assert "process 4242 on a-laptop, which no lease holder started" in line
        assert len(store.locks([namespace])) == 1  # the person's, left as it was
        assert owned_names(admin, namespace) == expected_names(["held-a"])
        removed()
        done = replica_0.call("ensure", namespace=namespace, intents=intents(["held-a", "held-b"]))
        assert done["ok"], done
        assert owned_names(admin, namespace) == expected_names(["held-a", "held-b"])
