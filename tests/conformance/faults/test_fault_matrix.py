"""Runs that die anywhere: a driver is SIGKILLed with its whole process tree, as when its host
dies, at a point of its run (read from the engine's event log, or held by the driver), and
another replica runs the next desired state.

Each cell is one kill point on one state backend (``file``, ``postgres``, ``s3`` with its leases
in PostgreSQL), with one next desired state: the killed run's intents (``same``), one key fewer
(``fewer``) or one key more (``more``). The next states rotate over the backends, so each point
meets each next state once and each backend each next state twice. Per cell:

1. Another stack's objects are placed in the namespace (``checker.other_stacks``); another
   namespace holds a stack of the same keys (``elsewhere``).
2. Driver A (its own process, workspace, PULUMI_HOME) applies the prior intents, then starts
   the run that is killed at the point (``driver.kill_at``), and is gone.
3. Replica B (another process and workspace) applies the next desired state.
4. The checker (``checker``): exactly the desired objects, the same objects where no
   replacement was due, nothing of another stack changed, no pending operation, and B's
   following run with the same intents a verified no-op.

The matrix (point x backend: next state, outcome, seconds) and its wall time are printed at the
end of the module. One more test kills a holder while replica B already waits for its lock (the
matrix's B asks only after the kill).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from infercrane_dev.statestores.postgres import PostgresServer
from infercrane_dev.statestores.s3 import S3Server
from infercrane_pulumi.config.intents import KubernetesSettings
from tests.conformance.faults import checker
from tests.conformance.faults.checker import Expected, Listing, intent
from tests.conformance.faults.conftest import Site
from tests.conformance.faults.driver import (
    WAITING_MARK,
    Driver,
    Kill,
    Point,
    kill_at,
    prelude,
    step_starts,
    summary,
)
from tests.conformance.harness import show, wait_for
from tests.conformance.replica import SharedBackend

pytestmark = pytest.mark.conformance

NextState = Literal["same", "fewer", "more"]
NEXT_STATES: tuple[NextState, ...] = ("same", "fewer", "more")
BACKENDS = ("file", "postgres", "s3")
LEASE_WAIT = 60.0  # how long replica B may wait for the stack (a dead run's lease)

A, B, C, D = (intent(key) for key in "abcd")
B_UPDATED = intent("b", runtimeArgs=["--max-model-len", "2048"])  # an in-place update


@dataclass(frozen=True)
class Scenario:
    """A kill point, the intents applied before the killed run, and that run's intents (None:
    the killed run is a destroy)."""

    point: Point
    prior: tuple[dict[str, Any], ...]
    killed: tuple[dict[str, Any], ...] | None

    def next_state(self, which: NextState) -> list[dict[str, Any]]:
        """``same``: the killed run's intents (a destroy's: the prior ones); ``fewer``: without
        the key that run worked on last; ``more``: with one key no run has seen."""
        base = list(self.prior if self.killed is None else self.killed)
        return {"same": base, "fewer": base[:-1], "more": [*base, D]}[which]


SCENARIOS = (
    # Nothing written yet: the engine has started and holds the stack's lock.
    Scenario(Point("before-first-write", prelude), (A,), (A, B)),
    # Points after the first write are held by the driver (driver.py), not chased: read from
    # the engine's log, a run of about a second could end before its point was read.
    # b's first object is in the API server; no state records it.
    Scenario(Point("created-not-recorded", step_starts("create"), "after-apply"), (A,), (A, B)),
    # b's Deployment is updated in the API server; the state still records the previous one.
    Scenario(
        Point("updated-not-recorded", step_starts("update"), "after-apply"), (A, B), (A, B_UPDATED)
    ),
    # b is applied, c not yet forgotten (the engine forgets after the program), nothing written:
    # with the next point, either side of the state's one write (its checkpoint replaced at once).
    Scenario(Point("before-state-write", summary, "after-apply"), (A, C), (A, B)),
    # The state is written without c; c's objects are still in the API server (an up deletes
    # them by uid after the engine).
    Scenario(
        Point("after-state-write", step_starts("delete"), "before-deletes"), (A, B, C), (A, B)
    ),
    # The run path has deleted the stack's objects (by uid) and started the engine, which
    # holds the lock and has yet to forget them (its delete steps only forget: they end within
    # milliseconds of each other, too soon to kill between).
    Scenario(Point("during-destroy", prelude), (A, B), None),
)


@dataclass(frozen=True)
class Cell:
    scenario: Scenario
    backend: str
    next: NextState

    @property
    def id(self) -> str:
        return f"{self.scenario.point.name}-{self.backend}"


CELLS = [
    Cell(scenario, backend, NEXT_STATES[(row + column) % len(NEXT_STATES)])
    for row, scenario in enumerate(SCENARIOS)
    for column, backend in enumerate(BACKENDS)
]


@dataclass
class Matrix:
    """Every cell's outcome, printed as one table at the end of the module."""

    started: float = field(default_factory=time.monotonic)
    outcomes: dict[str, str] = field(default_factory=dict)
    details: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def cell(self, cell: Cell) -> Iterator[list[str]]:
        """Record the cell's outcome, whatever ends it; the caller adds evidence lines."""
        started, evidence = time.monotonic(), [f"next {cell.next}"]
        outcome = "FAIL"
        try:
            yield evidence
            outcome = "pass"
        except pytest.skip.Exception as skipped:
            outcome = f"skip ({skipped.msg})"
            raise
        except AssertionError as failed:
            evidence.append((str(failed).splitlines() or ["AssertionError"])[0][:400])
            raise
        except Exception as error:
            outcome = "ERROR"
            evidence.append(f"{type(error).__name__}: {str(error)[:300]}")
            raise
        finally:
            self.outcomes[cell.id] = f"{cell.next}: {outcome} {time.monotonic() - started:.0f}s"
            self.details.append(f"  {cell.id}: {outcome}; " + "; ".join(evidence))

    def table(self) -> str:
        width = max(len(s.point.name) for s in SCENARIOS) + 2
        lines = [
            "fault-injection matrix (point x backend: next state, outcome, seconds); "
            f"wall time {time.monotonic() - self.started:.0f}s",
            "".ljust(width) + "".join(backend.ljust(26) for backend in BACKENDS),
        ]
        for scenario in SCENARIOS:
            row = [
                self.outcomes.get(f"{scenario.point.name}-{b}", "not run (see -rs)").ljust(26)
                for b in BACKENDS
            ]
            lines.append(scenario.point.name.ljust(width) + "".join(row))
        return "\n".join([*lines, "cells:", *self.details])


@pytest.fixture(scope="module")
def matrix(pytestconfig: pytest.Config) -> Iterator[Matrix]:
    made = Matrix()
    yield made
    show(pytestconfig, made.table())


def shared_backend(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> SharedBackend:
    """The cell's state backend; the servers are the session's (asked for only when used)."""
    if name == "file":
        return SharedBackend(url=(tmp_path / "state").as_uri(), variables={})
    server: PostgresServer = request.getfixturevalue("postgres_server")
    password = {"PGPASSWORD": server.password}
    if name == "postgres":
        return SharedBackend(url=server.url, variables=password)
    bucket: S3Server = request.getfixturevalue("s3_server")
    return SharedBackend(bucket.url, bucket.variables | password, lease_url=server.url)


def keys(intents: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(entry["externalKey"]) for entry in intents]


def killed_run(
    site: Site, backend: SharedBackend, scenario: Scenario, evidence: list[str]
) -> tuple[Kill, Listing]:
    """Driver A applies the prior intents, then is killed in its next run at the point; what
    the namespace held before that run."""
    driver = Driver(site.directory / "killed", backend, site.settings)
    if scenario.killed is None:
        call: dict[str, Any] = {"op": "destroy", "namespace": site.namespace}
    else:
        call = {"op": "apply", "namespace": site.namespace, "intents": list(scenario.killed)}
    try:
        if scenario.prior:
            prior = driver.call("apply", namespace=site.namespace, intents=scenario.prior)
            assert prior["ok"], f"the prior run failed: {prior}"
            evidence.append(f"prior run {prior['seconds']:.1f}s")
        before = checker.listed(site.admin, site.namespace)
        kill = kill_at(driver, scenario.point, call, admin=site.admin, namespace=site.namespace)
    finally:
        driver.close()
    return kill, before


@contextlib.contextmanager
def replica_b(site: Site, backend: SharedBackend) -> Iterator[Future[Driver]]:
    """Replica B, started at once (it starts while driver A runs, as another host would be
    running), closed at the end."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        starting = pool.submit(Driver, site.directory / "next", backend, site.settings)
        try:
            yield starting
        finally:
            starting.result().close()


def next_runs(
    site: Site,
    replica: Driver,
    run: Mapping[str, Any],
    *,
    wanted: Sequence[Mapping[str, Any]],
    expected: Expected,
    evidence: list[str],
) -> list[str]:
    """The checker's findings after replica B's ``run`` of the next desired state, after
    exporting the stack and after B's following run with the same intents."""
    assert run["ok"], f"the next run failed: {run}"
    evidence.append(f"next run {run['seconds']:.1f}s: {run['changes']}")
    problems = checker.report_problems(run, expected)
    problems += checker.cluster_problems(site.admin, site.namespace, expected)
    exported = replica.call("export", namespace=site.namespace)
    problems += checker.stack_problems(exported, expected.keys)
    settled = checker.listed(site.admin, site.namespace)
    following = replica.call("apply", namespace=site.namespace, intents=wanted)
    after = checker.listed(site.admin, site.namespace)
    problems += checker.noop_problems(following, expected.keys, settled, after)
    evidence.append(f"following run {following['seconds']:.1f}s")
    return problems


def expected_after(
    site: Site,
    scenario: Scenario,
    wanted: Sequence[Mapping[str, Any]],
    before: Listing,
    bystanders: Mapping[checker.ObjectId, str],
) -> Expected:
    """What the next run must leave, given what the namespace held before the killed run
    (``before``) and holds now, and the other stacks' objects placed in it."""
    survivors = checker.listed(site.admin, site.namespace)
    next_keys = keys(wanted)
    return Expected(
        keys=frozenset(next_keys),
        # Kept by the killed run (found before it, or made by it) for a key still desired.
        same_objects=checker.uids(survivors, next_keys)
        | checker.uids(before, set(next_keys) & set(keys(scenario.killed or ()))),
        bystanders=bystanders,
        elsewhere={site.elsewhere.namespace: site.elsewhere.objects},
        # This stack's keys found now (the other stacks' are never deleted) and not desired.
        deleted=frozenset(
            key
            for obj, meta in survivors.items()
            if obj not in bystanders
            and not meta.get("deletionTimestamp")
            and (key := checker.key_of(meta)) is not None
        )
        - set(next_keys),
    )


@pytest.mark.parametrize("cell", CELLS, ids=[cell.id for cell in CELLS])
def test_fault(cell: Cell, matrix: Matrix, site: Site, request: pytest.FixtureRequest) -> None:
    scenario = cell.scenario
    wanted = scenario.next_state(cell.next)
    with matrix.cell(cell) as evidence:
        backend = shared_backend(cell.backend, request, site.directory)
        settings = KubernetesSettings.model_validate(site.settings)
        bystanders = checker.other_stacks(site.admin, settings)
        with replica_b(site, backend) as starting:
            kill, before = killed_run(site, backend, scenario, evidence)
            evidence.append(
                f"killed {kill.seconds:.1f}s into the run, after {kill.after or '-'}"
                + " (the engine had run every step)" * kill.engine_done
            )
            assert kill.landed, f"the run ended before {scenario.point.name}; events: {kill.seen}"
            expected = expected_after(site, scenario, wanted, before, bystanders)
            replica = starting.result()
            run = replica.call("apply", namespace=site.namespace, intents=wanted, wait=LEASE_WAIT)
            problems = next_runs(
                site, replica, run, wanted=wanted, expected=expected, evidence=evidence
            )
        assert not problems, " | ".join(problems)


def test_a_replica_waiting_for_a_holder_that_dies_takes_the_stack_over(
    site: Site, request: pytest.FixtureRequest
) -> None:
    """File state (no lease): replica B is already waiting for the stack's lock when its holder
    (driver A, after its first create) dies, leaving its lock file. B must take the stack over
    within its wait, not report it busy until its deadline. (The matrix's B starts only after
    the kill.)"""
    backend = shared_backend("file", request, site.directory)
    wanted = [A, B]
    evidence: list[str] = []
    with replica_b(site, backend) as starting:
        replica = starting.result()

        def replica_b_waits() -> None:
            replica.send("apply", namespace=site.namespace, intents=wanted, wait=LEASE_WAIT)
            wait_for(
                (replica.tmp / WAITING_MARK).exists,
                timeout=LEASE_WAIT,
                what="replica B to wait for the stack's lock",
            )

        driver = Driver(site.directory / "killed", backend, site.settings)
        try:
            call = {"op": "apply", "namespace": site.namespace, "intents": wanted}
            point = Point("created-not-recorded", step_starts("create"), "after-apply")
            kill = kill_at(
                driver,
                point,
                call,
                admin=site.admin,
                namespace=site.namespace,
                while_frozen=replica_b_waits,
            )
        finally:
            driver.close()
        assert kill.landed, f"the run ended before its first create; events: {kill.seen}"
        survivors = checker.listed(site.admin, site.namespace)
        expected = Expected(
            keys=frozenset(keys(wanted)),
            same_objects=checker.uids(survivors, keys(wanted)),
            bystanders={},
            elsewhere={site.elsewhere.namespace: site.elsewhere.objects},
        )
        problems = next_runs(
            site, replica, replica.answer(), wanted=wanted, expected=expected, evidence=evidence
        )
    assert not problems, " | ".join(problems)
