"""The deletion rule as a property: an object is deleted only when its caller named it.

``ensure(intents)`` names the whole desired set: every object exactly ours (our marks, this
stack's identity) of a key outside it goes, a killed run's leftovers included; ``remove(key)``
names that key only; ``destroy`` names the stack. An object that is not exactly ours (another
stack's, another team's look-alike at our name) is never adopted, changed or deleted.

A hypothesis state machine runs random sequences of: ``ensure`` of a subset of a small key pool
(each key at one of two intents), ``remove`` and ``destroy``, each maybe SIGKILLed with its driver's
whole process tree at a point of its run (``driver.kill_at``); an out-of-band delete of one of
our objects; a foreign edit (another field manager adds a label to our object or takes its
``.spec.replicas``, or another team puts a look-alike at a free name of ours); a restart (the next
call from a fresh driver process, on the same backend). Every call runs in a driver process
(``driver.Driver``), as a control-plane replica runs it. After every step, read as admin:

- (a) nothing was deleted (or replaced) that the step did not name; no other stack's object,
  look-alike or foreign-owned field changed;
- (b) a call that answered ok put every named key where it promised (``ensure``: exactly the
  desired keys' objects of ours, at the desired intents; ``remove``: none of its key's;
  ``destroy``: none of ours); one that failed did so with a typed ``InferCraneError`` (the driver
  answers only those; anything else ends it, and the step fails);
- (c) at the end of every sequence, once the other team has taken its look-alikes and contested
  objects away, an ``ensure`` of the desired set converges, the stack records exactly it with no
  pending operation, and the same ``ensure`` again is a verified no-op touching nothing.

``make test`` runs a fixed set of sequences (derandomized: the same ones every run; a failure
prints the shrunk sequence of steps and each step's notes). Each batch of ``make soak``
(``hack/soak.sh``) runs random ones for about ``INFERCRANE_SOAK_MINUTES`` under the seed it
prints (``--hypothesis-seed``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    rule,
    run_state_machine_as_test,
)
from kubernetes import client

from infercrane_pulumi.cluster import verdict
from infercrane_pulumi.cluster.api import Cluster, raise_for_status
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import kinds, naming, workloads
from tests.conformance.backends import Tenant
from tests.conformance.faults import checker
from tests.conformance.faults.checker import Listing, ObjectId
from tests.conformance.faults.driver import Driver, Point, kill_at, prelude, step_starts, summary
from tests.conformance.harness import show, wait_for
from tests.conformance.replica import SharedBackend
from tests.conformance.test_exact_deletion import look_alike
from tests.conformance.test_shared_state import settings_of

pytestmark = pytest.mark.conformance

# Few keys, so that sequences of a few steps meet the same key again.
POOL = ("p0", "p1", "p2", "p3")
# Each key's two intents: the second an in-place update of the first.
VARIANTS: tuple[dict[str, Any], ...] = ({}, {"runtimeArgs": ["--max-model-len", "2048"]})
OTHER_MANAGER = "infercrane-suite-other-team"
FOREIGN_LABEL = "team.example/note"
CONTESTED_REPLICAS = 2

# Where a run is killed: read from the engine's log, or held by the driver (driver.py).
POINTS = {
    "engine-started": Point("engine-started", prelude),
    "after-apply": Point("after-apply", step_starts("create", "update"), "after-apply"),
    "engine-summary": Point("engine-summary", summary),
    "before-deletes": Point("before-deletes", step_starts("delete"), "before-deletes"),
}
# after-apply holds on an intent of the call: a remove or a destroy has none.
UNAPPLYING_POINTS = sorted(set(POINTS) - {"after-apply"})

SOAK_MINUTES = float(os.environ.get("INFERCRANE_SOAK_MINUTES") or 0)
# make test: a fixed set, within its budget. make soak: random sequences, as many as fit
# SOAK_MINUTES at the pace measured in make test (268 s for 20 here): hypothesis has no time
# bound, and a run ended early (a sequence refused or failed once the time is up) makes its
# replay of a choice sequence disagree with the first run (FlakyStrategyDefinition).
SECONDS_PER_SEQUENCE = 13
SEQUENCES = (
    int(SOAK_MINUTES * 60 / SECONDS_PER_SEQUENCE)
    if SOAK_MINUTES
    else int(os.environ.get("INFERCRANE_RULE_SEQUENCES", "20"))
)
STEPS = 6
RULE_SETTINGS = settings(
    max_examples=SEQUENCES,
    stateful_step_count=STEPS,
    derandomize=not SOAK_MINUTES,
    database=None,
    deadline=None,
    print_blob=True,
    # Each sequence drives real engine runs: seconds per step, by design.
    suppress_health_check=list(HealthCheck),
)

Intents = list[tuple[str, int]]  # key, variant


def intent_sets(min_size: int) -> st.SearchStrategy[Intents]:
    """Distinct keys of the pool, each at one of its intents."""
    return st.lists(
        st.tuples(st.sampled_from(POOL), st.integers(0, len(VARIANTS) - 1)),
        min_size=min_size,
        max_size=len(POOL),
        unique_by=lambda entry: entry[0],
    )


KILLS = st.none() | st.sampled_from(sorted(POINTS))
UNAPPLYING_KILLS = st.none() | st.sampled_from(UNAPPLYING_POINTS)
FRESH = st.booleans()  # the call from a fresh driver process (a restart)
# Object names are hashes of keys: shown by key.
KEY_OF_NAME = {naming.object_name(key): key for key in POOL}
Named = Callable[[str], bool]  # whether a step names a key of ours for deletion


@dataclass
class World:
    """What every sequence shares: one namespace and its provider identity, read and changed
    as admin; each sequence gets a directory of its own for its state and its drivers."""

    tenant: Tenant
    admin: Cluster
    api: client.ApiClient
    directory: Path
    sequences: int = 0
    steps: int = 0
    kills: dict[str, int] = field(default_factory=dict)  # point: how many landed

    @property
    def namespace(self) -> str:
        return self.tenant.namespace

    def clear(self) -> None:
        """Delete every Deployment and Service of the namespace (the last sequence's), and wait
        until none is left: the next sequence's stack has the same identity."""
        for kind in checker.OBJECT_KINDS:
            for name in self.admin.metadata(kind, self.namespace):
                self.delete(kind.kind, name)
        wait_for(
            lambda: not checker.listed(self.admin, self.namespace),
            timeout=60,
            what=f"namespace {self.namespace} to hold no Deployment or Service",
        )

    def delete(self, kind: str, name: str) -> None:
        path = workloads.KINDS[kind].path(self.namespace, name)
        deleted = self.admin.transport.request(
            "DELETE", path, query=[("propagationPolicy", "Background")]
        )
        if deleted.status != 404:
            raise_for_status(deleted, f"delete {kind} {name}")

    def patch(self, obj: ObjectId, body: Mapping[str, Any]) -> dict[str, Any]:
        """A merge patch of ``obj`` as another team's field manager (an Update, as kubectl
        edit or scale would write it)."""
        patched = self.admin.transport.request(
            "PATCH",
            workloads.KINDS[obj[0]].path(self.namespace, obj[1]),
            query=[("fieldManager", OTHER_MANAGER)],
            body=body,
            content_type="application/merge-patch+json",
        )
        raise_for_status(patched, f"patch {obj[0]} {obj[1]}")
        return patched.body


@dataclass(frozen=True)
class Step:
    """A call of the control plane, what it names for deletion, and what it promises when it
    answers ok."""

    what: str
    call: dict[str, Any]
    named: Named
    promised: Callable[[Listing], list[str]]


def intents_of(chosen: Intents) -> list[dict[str, Any]]:
    return [checker.intent(key, **VARIANTS[variant]) for key, variant in chosen]


def shown(obj: ObjectId) -> str:
    kind, name = obj
    return f"{kind}/{KEY_OF_NAME[name]}" if name in KEY_OF_NAME else f"{kind}/{name}"


def deleting(meta: Mapping[str, Any]) -> bool:
    return bool(meta.get("deletionTimestamp"))


class DeletionRule(RuleBasedStateMachine):
    """One sequence: a new stack (file state of its own) on the cleared namespace, beside
    another stack's objects that no step may touch."""

    def __init__(self, world: World) -> None:
        super().__init__()
        world.sequences += 1
        world.clear()
        self.world = world
        self.home = world.directory / f"sequence-{world.sequences}"
        (self.home / "state").mkdir(parents=True)
        self.backend = SharedBackend(url=(self.home / "state").as_uri(), variables={})
        self.settings = settings_of(world.tenant)
        self.typed = KubernetesSettings.model_validate(self.settings)
        self.mark = naming.stack_identity(naming.PROJECT_NAME, world.namespace)
        # Objects not exactly ours: their fingerprints (uid, generation, marks) must hold.
        self.foreign: dict[ObjectId, str] = checker.other_stacks(world.admin, self.typed)
        self.look_alikes: set[ObjectId] = set()
        # Our objects another manager wrote to, by uid: its label, or its .spec.replicas.
        self.labelled: dict[ObjectId, tuple[str, str]] = {}
        self.contested: dict[ObjectId, str] = {}
        self.desired: Intents = []  # what the control plane's database holds
        self.driver: Driver | None = None
        self.drivers = 0
        self.steps = 0
        # A step began and did not pass its checks (a failure, whatever raised it): the
        # teardown then only cleans up.
        self.unfinished = False
        self.live = checker.listed(world.admin, world.namespace)

    # -- the steps ----------------------------------------------------------------------------
    # Every sequence starts with an ensure: with nothing applied, little is left to prove.

    @initialize(chosen=intent_sets(1), kill=KILLS, fresh=st.just(False))
    def first_ensure(self, chosen: Intents, kill: str | None, fresh: bool) -> None:
        self.ensure(chosen, kill, fresh)

    @rule(chosen=intent_sets(0), kill=KILLS, fresh=FRESH)
    def ensure(self, chosen: Intents, kill: str | None, fresh: bool) -> None:
        self.desired = list(chosen)
        keys = {key for key, _ in chosen}
        if kill == "after-apply" and not chosen:
            kill = "engine-started"  # no intent to hold after
        step = Step(
            f"ensure {chosen}",
            {"op": "apply", "intents": intents_of(chosen)},
            named=lambda key: key not in keys,
            promised=lambda after: self.exactly(chosen, after),
        )
        self.run(step, kill, fresh)

    @rule(key=st.sampled_from(POOL), kill=UNAPPLYING_KILLS, fresh=FRESH)
    def remove(self, key: str, kill: str | None, fresh: bool) -> None:
        self.desired = [entry for entry in self.desired if entry[0] != key]
        step = Step(
            f"remove {key}",
            {"op": "remove", "key": key},
            named=lambda other: other == key,
            promised=lambda after: [
                f"{shown(obj)} of the removed key is still there"
                for obj, owner in self.ours(after).items()
                if owner == key
            ],
        )
        self.run(step, kill, fresh)

    @rule(kill=UNAPPLYING_KILLS, fresh=FRESH)
    def destroy(self, kill: str | None, fresh: bool) -> None:
        self.desired = []
        step = Step(
            "destroy",
            {"op": "destroy"},
            named=lambda key: True,
            promised=lambda after: [f"{shown(obj)} outlived destroy" for obj in self.ours(after)],
        )
        self.run(step, kill, fresh)

    @rule(
        how=st.sampled_from(["delete", "label", "field"]),
        kind=st.sampled_from([kind.kind for kind in checker.OBJECT_KINDS]),
        key=st.sampled_from(POOL),
    )
    def interfere(self, how: str, kind: str, key: str) -> None:
        """As admin, at ``key``'s ``kind``: if an object of ours is there, delete it out of band
        (``delete``), or another field manager writes a label on it (``label``) or takes its
        .spec.replicas (``field``; on a Service, a label); if the name is free, another team
        puts a look-alike there. (Drawn from the pool, not from what the cluster holds: hypothesis
        must draw the same sequence again, however the kills landed.)"""
        self.begin()
        world = self.world
        obj = (kind, naming.object_name(key))
        if obj not in self.live:
            how = "look-alike"
            look_alike(world.api, workloads.KINDS[kind], world.namespace, key)
            self.look_alikes.add(obj)
            found = checker.listed(world.admin, world.namespace)
            self.foreign[obj] = checker.fingerprint(found[obj])
        elif obj not in self.ours(self.live):
            how = "nothing (not ours)"
        elif how == "delete":
            world.delete(*obj)
        elif how == "field" and kind == kinds.DEPLOYMENT.kind:
            edited = world.patch(obj, {"spec": {"replicas": CONTESTED_REPLICAS}})
            self.contested[obj] = str(edited["metadata"]["uid"])
        else:
            how, value = "label", f"edit-{self.steps}"
            edited = world.patch(obj, {"metadata": {"labels": {FOREIGN_LABEL: value}}})
            self.labelled[obj] = (str(edited["metadata"]["uid"]), value)
        self.check(f"admin: {how} {shown(obj)}", lambda key: False, exempt={obj})

    # -- running a call -----------------------------------------------------------------------

    def run(self, step: Step, kill: str | None, fresh: bool) -> None:
        """``step``'s call, killed at ``kill`` (None: not); ``fresh``: from a new driver process
        (a restart), else from the last one if it is still running."""
        self.begin()
        if fresh:
            self.stop_driver()
        driver = self.current_driver()
        call = step.call | {"namespace": self.world.namespace}
        if kill is None:
            answer: dict[str, Any] | None = driver.call(**call)
            outcome = ""
        else:
            self.driver = None
            try:
                killed = kill_at(
                    driver,
                    POINTS[kill],
                    call,
                    admin=self.world.admin,
                    namespace=self.world.namespace,
                )
            finally:
                driver.close()
            answer = killed.answer
            if killed.landed:
                self.world.kills[kill] = self.world.kills.get(kill, 0) + 1
                outcome = f"SIGKILLed at {kill}, after {killed.after}"
            elif answer is None:
                seen = ", ".join(killed.seen[-3:]) or "no event"
                self.fail(
                    step.what,
                    [
                        f"the driver ended without answering, {kill} not reached"
                        f" (last events: {seen}; {driver.name}/stderr)"
                    ],
                )
            else:
                outcome = f"answered before {kill}; "
        problems = []
        if answer is not None:
            if answer["ok"]:
                outcome += f"ok {answer['changes']}" + (
                    f", left {answer['left']}" if answer.get("left") else ""
                )
                after = checker.listed(self.world.admin, self.world.namespace)
                problems += step.promised(after)
            else:
                outcome += f"failed {answer['error']['code']}: {answer['error']['problems']}"
        restart = "from a fresh driver, " if fresh else ""
        self.check(f"{step.what}: {restart}{outcome}", step.named, problems=problems)

    def current_driver(self) -> Driver:
        if self.driver is None:
            self.drivers += 1
            own = self.home / f"driver-{self.drivers}"
            self.driver = Driver(own, self.backend, self.settings)
        return self.driver

    def stop_driver(self) -> None:
        if self.driver is not None:
            self.driver.close()
            self.driver = None

    # -- the checks ---------------------------------------------------------------------------

    def check(
        self,
        what: str,
        named: Named,
        *,
        exempt: Iterable[ObjectId] = (),
        problems: Sequence[str] = (),
    ) -> None:
        """(a) over the step just taken (``exempt``: what the step itself deleted as admin),
        with the step's other ``problems``; the model follows the cluster."""
        self.steps += 1
        self.world.steps += 1
        after = checker.listed(self.world.admin, self.world.namespace)
        found = [
            *self.unnamed_deletions(self.live, after, named, set(exempt)),
            *self.foreign_changes(after),
            *problems,
        ]
        deleted = sorted(
            shown(obj)
            for obj, meta in self.live.items()
            if obj not in after or after[obj]["uid"] != meta["uid"] or deleting(after[obj])
        )
        note(f"step {self.steps}: {what}; gone or replaced: {deleted or 'nothing'}")
        self.live = after
        if found:
            self.fail(what, found)
        self.unfinished = False

    def begin(self) -> None:
        self.unfinished = True

    def fail(self, what: str, problems: Sequence[str]) -> None:
        raise AssertionError(f"step {self.steps}, {what}:\n  " + "\n  ".join(problems))

    def unnamed_deletions(
        self, before: Listing, after: Listing, named: Named, exempt: set[ObjectId]
    ) -> list[str]:
        problems = []
        for obj, meta in sorted(before.items()):
            now = after.get(obj)
            gone = now is None or now["uid"] != meta["uid"] or deleting(now)
            if deleting(meta) or obj in exempt or not gone:
                continue
            key = self.owner(meta)
            if key is None or not named(key):
                whose = f"ours, key {key}" if key else f"not ours, key {checker.key_of(meta)!r}"
                how = "deleted" if now is None or deleting(now) else "replaced"
                problems.append(f"{shown(obj)} ({whose}) {how}, and the step did not name it")
        return problems

    def foreign_changes(self, after: Listing) -> list[str]:
        problems = [
            f"{shown(obj)}, not ours, changed: {checker.fingerprint(after[obj])} (was {was})"
            for obj, was in sorted(self.foreign.items())
            if obj in after and checker.fingerprint(after[obj]) != was
        ]
        for obj, (uid, value) in sorted(self.labelled.items()):
            if obj in after and after[obj]["uid"] == uid:
                label = (after[obj].get("labels") or {}).get(FOREIGN_LABEL)
                if label != value:
                    problems.append(f"{shown(obj)}: {OTHER_MANAGER}'s label is now {label!r}")
        for obj, uid in sorted(self.contested.items()):
            live = self.world.admin.get(kinds.DEPLOYMENT, self.world.namespace, obj[1])
            if live is not None and live["metadata"]["uid"] == uid:
                replicas = live["spec"].get("replicas")
                if replicas != CONTESTED_REPLICAS:
                    problems.append(
                        f"{shown(obj)}: .spec.replicas, {OTHER_MANAGER}'s, is now {replicas}"
                    )
        return problems

    def exactly(self, chosen: Intents, after: Listing) -> list[str]:
        """(b) for an ensure that answered ok: exactly the desired keys' objects of ours, each
        carrying its desired intent."""
        wanted = {
            obj: naming.intent_hash(self.typed, ReplicaIntent.model_validate(entry))
            for entry in intents_of(chosen)
            for obj in checker.objects_of([entry["externalKey"]])
        }
        ours = self.ours(after)
        problems = []
        if missing := sorted(map(shown, wanted.keys() - ours.keys())):
            problems.append(f"desired, not there as ours: {missing}")
        if extra := sorted(map(shown, ours.keys() - wanted.keys())):
            problems.append(f"ours, not desired, left: {extra}")
        problems += [
            f"{shown(obj)} does not carry its desired intent"
            for obj in sorted(wanted.keys() & ours.keys())
            if (after[obj].get("annotations") or {}).get(naming.ANNOTATION_INTENT_HASH)
            != wanted[obj]
        ]
        return problems

    def owner(self, meta: Mapping[str, Any]) -> str | None:
        """The key of an object exactly ours and of this stack, else None."""
        key = verdict.owner_key(meta, self.world.namespace)
        return key if (meta.get("labels") or {}).get(naming.LABEL_STACK) == self.mark else None

    def ours(self, listing: Listing) -> dict[ObjectId, str]:
        """Our objects (not being deleted) and their keys."""
        return {
            obj: key
            for obj, meta in listing.items()
            if not deleting(meta) and (key := self.owner(meta)) is not None
        }

    # -- (c) ----------------------------------------------------------------------------------

    def teardown(self) -> None:
        try:
            if not self.unfinished:
                self.converges()
        finally:
            self.stop_driver()

    def converges(self) -> None:
        """The other team takes its look-alikes and contested objects away; then an ensure of
        the desired set converges, the stack records exactly it, and is then a verified no-op."""
        taken = self.look_alikes | self.contested.keys()
        self.begin()
        for obj in sorted(taken):
            self.world.delete(*obj)
            self.foreign.pop(obj, None)
        self.check("the other team takes its objects away", lambda key: False, exempt=taken)
        self.begin()
        keys = [key for key, _ in self.desired]
        step = Step(
            f"converging ensure {self.desired}",
            {"op": "apply", "intents": intents_of(self.desired)},
            named=lambda key: key not in keys,
            promised=lambda after: self.exactly(self.desired, after),
        )
        driver = self.current_driver()
        answer = driver.call(**step.call, namespace=self.world.namespace)
        problems = [] if answer["ok"] else [f"the converging ensure failed: {answer['error']}"]
        after = checker.listed(self.world.admin, self.world.namespace)
        if answer["ok"]:
            problems += step.promised(after)
        self.check(step.what, step.named, problems=problems)
        exported = driver.call("export", namespace=self.world.namespace)
        self.begin()
        following = driver.call(**step.call, namespace=self.world.namespace)
        problems = checker.stack_problems(exported, keys) + checker.noop_problems(
            following, keys, after, checker.listed(self.world.admin, self.world.namespace)
        )
        self.check("the same ensure again, a verified no-op", lambda key: False, problems=problems)


def in_world(world: World) -> type[DeletionRule]:
    """The machine class hypothesis builds each sequence from, on ``world``."""

    class InWorld(DeletionRule):
        def __init__(self) -> None:
            super().__init__(world)

    return InWorld


@pytest.mark.timeout(
    # make test: the sequences, and hypothesis's own bound on shrinking a failure (300 s).
    SOAK_MINUTES * 60 + 1800
)
def test_an_object_is_deleted_only_when_its_caller_named_it(
    tenant: Tenant,
    admin: Cluster,
    admin_client: client.ApiClient,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    started = time.monotonic()
    world = World(tenant, admin, admin_client, tmp_path)
    try:
        run_state_machine_as_test(in_world(world), settings=RULE_SETTINGS)
    finally:
        kills = ", ".join(f"{point} {n}" for point, n in sorted(world.kills.items()))
        show(
            pytestconfig,
            f"deletion rule: {world.sequences} sequences, {world.steps} steps "
            f"(kills landed: {kills or 'none'}) in {time.monotonic() - started:.0f}s",
        )
