"""Issue 59's rules as properties: what two runners apply when the control plane writes versions
of the stack file to their ConfigMap and each runner's own copy lags (by any number of
versions), some versions misspelt or cut short, and runs are killed at random moments.

A hypothesis state machine, on one namespace whose provider may read the ConfigMap (the shipped
runner's Role), runs random sequences of: a new version written to the ConfigMap (a set of keys
from a small pool, each at one of two intents; or that file with its replicas key misspelt; or
it cut short at a random byte); a version delivered to one runner's copy (the kubelet's, of
any age); a run of one runner (``up --configmap``, the shipped runner's command), maybe
SIGKILLed with every process it started after a random delay; both runners at once. The state
is a file backend both share. After every run, read as admin:

- an object is deleted only when the newest version written no longer names its key (and
  parses): a refused newest version, a lagging copy, a killed run delete nothing else;
- an object appears only for a key the newest version names;
- a key's objects keep their uid while it stays named (its intents change in place);
- the version the stack records having applied never goes back, and is one written;
- a run that was not killed and answered ok leaves exactly the newest version's keys; one that
  answered an error was refused as invalid input, and the newest version (or its own copy)
  does not parse.

At the end of every sequence, a valid version is written and each runner, from whatever copy
it holds, converges on it. ``make test`` runs a fixed set of sequences; ``make soak`` random
ones (``INFERCRANE_SOAK_MINUTES``, as the deletion rule's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test
from kubernetes import client

from infercrane_dev.localcluster.processes import kill_tree
from infercrane_pulumi.automation import engine, project
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config.files import parse_stack_text
from infercrane_pulumi.config.intents import ALLOW_EMPTY_KEY, KUBERNETES_KEY, REPLICAS_KEY
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.program import records
from tests.conformance.backends import Tenant
from tests.conformance.faults import checker
from tests.conformance.faults.test_deletion_rule import KEY_OF_NAME, POOL, VARIANTS, World
from tests.conformance.harness import ROOT, show
from tests.conformance.test_desired_state import CONFIGMAP, grant_the_runners_read
from tests.conformance.test_shared_state import settings_of

pytestmark = pytest.mark.conformance

SOAK_MINUTES = float(os.environ.get("INFERCRANE_SOAK_MINUTES") or 0)
SECONDS_PER_SEQUENCE = 25  # measured in make test: see the test's line of output
SEQUENCES = (
    int(SOAK_MINUTES * 60 / SECONDS_PER_SEQUENCE)
    if SOAK_MINUTES
    else int(os.environ.get("INFERCRANE_VERSION_SEQUENCES", "20"))
)
VERSION_SETTINGS = settings(
    max_examples=SEQUENCES,
    stateful_step_count=5,
    derandomize=not SOAK_MINUTES,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
RUNNERS = (0, 1)
# A run killed this long after it started: before its engine, in it, or after.
KILLS = st.none() | st.sampled_from([0.5, 1.5, 2.5, 4.0])
Intents = list[tuple[str, int]]


@dataclass(frozen=True)
class Version:
    """A version of the stack file as written to the ConfigMap, and what it asks for: each key
    at its intent, or None when it does not parse (nothing may be applied from it)."""

    text: str
    wanted: dict[str, int] | None
    resource_version: str


@dataclass
class Runs:
    """What every sequence shares, beside the namespace (``World``)."""

    world: World
    env: dict[str, str]
    sequences: int = 0
    runs: int = 0
    kills: int = 0
    refusals: int = 0
    seconds: list[float] = field(default_factory=list)


def intents(chosen: Intents) -> list[dict[str, Any]]:
    return [checker.intent(key, **VARIANTS[variant]) for key, variant in chosen]


def keys_of(listing: checker.Listing) -> dict[str, dict[str, str]]:
    """Each key of ours: its objects' uids by kind."""
    found: dict[str, dict[str, str]] = {}
    for (kind, name), meta in listing.items():
        if name in KEY_OF_NAME and not meta.get("deletionTimestamp"):
            found.setdefault(KEY_OF_NAME[name], {})[kind] = str(meta["uid"])
    return found


def _older(version: str, than: str) -> bool:
    return (len(version), version) < (len(than), than)


class DesiredVersions(RuleBasedStateMachine):
    def __init__(self, runs: Runs) -> None:
        super().__init__()
        runs.sequences += 1
        runs.world.clear()
        self.runs = runs
        world = runs.world
        self.home = world.directory / f"versions-{runs.sequences}"
        self.state = self.home / "state"
        self.state.mkdir(parents=True)
        self.settings = settings_of(world.tenant)
        self.stack = world.namespace
        self.key = f"Pulumi.{self.stack}.yaml"
        self.copies = [self.home / f"runner-{n}" / "stacks" / self.key for n in RUNNERS]
        for copy in self.copies:
            copy.parent.mkdir(parents=True)
        self.versions: list[Version] = []
        self.recorded: str | None = None  # the resourceVersion the stack records having applied
        self.live = keys_of(checker.listed(world.admin, world.namespace))
        self.last_valid: Intents = []

    # -- versions -----------------------------------------------------------------------------

    def document(self, chosen: Intents) -> str:
        config = {
            KUBERNETES_KEY: self.settings,
            REPLICAS_KEY: intents(chosen),
            ALLOW_EMPTY_KEY: True,  # emptying on purpose is not what is under test here
        }
        return yaml.safe_dump({"config": config})

    def publish(self, text: str) -> Version:
        patch = {"data": {self.key: text}}
        core = client.CoreV1Api(self.runs.world.api)
        written = core.patch_namespaced_config_map(CONFIGMAP, self.runs.world.namespace, patch)
        try:
            config = parse_stack_text(text, source="the version")
            wanted: dict[str, int] | None = {
                intent.external_key: int(intent.runtime_args != []) for intent in config.replicas
            }
        except ConfigError:
            wanted = None
        assert written.metadata is not None
        version = Version(text, wanted, str(written.metadata.resource_version))
        self.versions.append(version)
        return version

    @initialize(chosen=st.lists(st.sampled_from(POOL), min_size=1, unique=True))
    def first(self, chosen: list[str]) -> None:
        """The ConfigMap's first version, in both runners' copies."""
        world = self.runs.world
        text = self.document([(key, 0) for key in chosen])
        client.CoreV1Api(world.api).create_namespaced_config_map(
            world.namespace,
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name=CONFIGMAP), data={self.key: text}),
        )
        self.publish(text)
        for copy in self.copies:
            copy.write_text(text)
        note(f"first version: {sorted(chosen)}")

    @rule(
        chosen=st.lists(
            st.tuples(st.sampled_from(POOL), st.integers(0, len(VARIANTS) - 1)),
            max_size=len(POOL),
            unique_by=lambda entry: entry[0],
        ),
        form=st.sampled_from(["valid", "valid", "misspelt", "cut"]),
        cut=st.floats(0.05, 0.95),
    )
    def write(self, chosen: Intents, form: str, cut: float) -> None:
        text = self.document(chosen)
        if form == "misspelt":
            text = text.replace(REPLICAS_KEY, "infercrane:replica")
        elif form == "cut":
            text = text[: int(len(text) * cut)]
        version = self.publish(text)
        if version.wanted is not None:
            self.last_valid = chosen
        note(f"v{len(self.versions)} ({form}): {version.wanted} at {version.resource_version}")

    @rule(runner=st.sampled_from(RUNNERS), age=st.integers(0, 3))
    def deliver(self, runner: int, age: int) -> None:
        """The kubelet's copy of ``runner`` now holds the version ``age`` before the newest."""
        index = max(0, len(self.versions) - 1 - age)
        self.copies[runner].write_text(self.versions[index].text)
        note(f"runner {runner}'s copy: v{index + 1}")

    # -- runs ---------------------------------------------------------------------------------

    @rule(runner=st.sampled_from(RUNNERS), kill=KILLS)
    def run(self, runner: int, kill: float | None) -> None:
        self.check([self.start(runner)], {0: kill} if kill is not None else {})

    @rule(kill=KILLS)
    def both(self, kill: float | None) -> None:
        started = [self.start(n) for n in RUNNERS]
        self.check(started, {0: kill} if kill is not None else {})

    def start(self, runner: int) -> subprocess.Popen[str]:
        project_dir = self.copies[runner].parent.parent
        command = ["up", "--stack", self.stack, "--project-dir", str(project_dir)]
        command += ["--configmap", CONFIGMAP, "--wait", "120", "--json"]
        return subprocess.Popen(
            [sys.executable, "-m", "infercrane_pulumi", *command],
            env=self.runs.env | {"PULUMI_BACKEND_URL": self.state.as_uri()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def check(self, started: list[subprocess.Popen[str]], kills: dict[int, float]) -> None:
        """Wait for the runs (killing those in ``kills`` after their delay), then the rules."""
        world = self.runs.world
        began = time.monotonic()
        answers: list[dict[str, Any] | None] = []
        for n, process in enumerate(started):
            if n in kills:
                answers.append(self.killed(process, kills[n]))
            else:
                out, err = process.communicate(timeout=300)
                assert out.strip(), f"runner exited {process.returncode} without answering: {err}"
                answers.append(json.loads(out))
        self.runs.runs += len(started)
        self.runs.seconds.append(time.monotonic() - began)
        newest = self.versions[-1]
        after = keys_of(checker.listed(world.admin, world.namespace))
        problems = self.unjustified(self.live, after, newest)
        problems += self.record_problems()
        for answer in answers:
            if answer is None:
                continue
            if answer["ok"]:
                if newest.wanted is None or set(after) != set(newest.wanted):
                    problems.append(f"answered ok, but holds {sorted(after)}: {answer}")
            elif answer["error"]["code"] != "invalid-config":
                problems.append(f"failed other than as invalid input: {answer['error']}")
            else:
                self.runs.refusals += 1
        note(f"runs: {[a and a.get('ok') for a in answers]} -> {sorted(after)}")
        self.live = after
        if problems:
            raise AssertionError("\n  ".join(["after the runs:", *problems]))

    def killed(self, process: subprocess.Popen[str], delay: float) -> dict[str, Any] | None:
        """SIGKILL the runner and every process it started, ``delay`` seconds in; its answer if
        it had answered by then."""
        try:
            out, _ = process.communicate(timeout=delay)
            return dict(json.loads(out)) if out.strip() else None
        except subprocess.TimeoutExpired:
            pass
        kill_tree(process.pid)
        process.communicate(timeout=60)
        self.runs.kills += 1
        return None

    # -- the rules ----------------------------------------------------------------------------

    def unjustified(
        self, before: dict[str, dict[str, str]], after: dict[str, dict[str, str]], newest: Version
    ) -> list[str]:
        wanted = newest.wanted
        problems = []
        for key, objects in before.items():
            gone = set(objects) - set(after.get(key, {}))
            if gone and (wanted is None or key in wanted):
                problems.append(f"{key}'s {sorted(gone)} deleted, but the newest version names it")
            for kind, uid in objects.items():
                now = after.get(key, {}).get(kind)
                if now is not None and now != uid:
                    problems.append(f"{key}'s {kind} replaced ({uid} -> {now})")
        for key in set(after) - set(before):
            if wanted is None or key not in wanted:
                problems.append(f"{key} appeared, but the newest version does not name it")
        return problems

    def record_problems(self) -> list[str]:
        outputs = engine.checkpoint_outputs(self.state.as_uri(), project.PROJECT_NAME, self.stack)
        desired = None if outputs is None else records.from_outputs(outputs).desired
        if desired is None:
            return []
        now = desired.resource_version
        problems = []
        if now not in {version.resource_version for version in self.versions}:
            problems.append(f"the stack records version {now}, which was never written")
        if self.recorded is not None and _older(now, self.recorded):
            problems.append(f"the recorded version went back from {self.recorded} to {now}")
        self.recorded = now
        return problems

    def teardown(self) -> None:
        """Converge from whatever each runner's copy holds on a last, valid version."""
        if not self.versions:
            return
        self.publish(self.document(self.last_valid))
        for runner in RUNNERS:
            self.check([self.start(runner)], {})
        assert set(self.live) == {key for key, _ in self.last_valid}, self.live


@pytest.mark.timeout(SOAK_MINUTES * 60 + 1800)
def test_two_runners_apply_only_the_newest_stack_file_whatever_their_copies(
    tenant: Tenant,
    admin: Cluster,
    admin_client: client.ApiClient,
    tmp_path: Path,
    pytestconfig: pytest.Config,
) -> None:
    grant_the_runners_read(admin_client, tenant.namespace, tenant.namespace)
    world = World(tenant, admin, admin_client, tmp_path)
    runs = Runs(world, _runner_environment(tenant))
    started = time.monotonic()

    class InWorld(DesiredVersions):
        def __init__(self) -> None:
            super().__init__(runs)

        def teardown(self) -> None:
            try:
                super().teardown()
            finally:
                client.CoreV1Api(admin_client).delete_namespaced_config_map(
                    CONFIGMAP, tenant.namespace
                )

    try:
        run_state_machine_as_test(InWorld, settings=VERSION_SETTINGS)
    finally:
        show(
            pytestconfig,
            f"desired versions: {runs.sequences} sequences, {runs.runs} runs ({runs.kills} "
            f"killed, {runs.refusals} refused as invalid) in {time.monotonic() - started:.0f}s",
        )


def _runner_environment(tenant: Tenant) -> dict[str, str]:
    """What the shipped runner has: its state's passphrase, a Pulumi home with the plugin, the
    tools; its kubeconfig is the stack file's (the provider's identity)."""
    return os.environ | {
        "PULUMI_CONFIG_PASSPHRASE": "versions-only",
        "PULUMI_HOME": str(ROOT / ".infercrane" / "pulumi-home"),
    }
