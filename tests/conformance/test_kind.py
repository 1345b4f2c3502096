"""The seed's disposable Kind test: the suite's own proofs, on a Kind cluster built here.

A Kind cluster of this module's own (``infercrane_dev.kind``: kubeadm's API server with its
default admission plugins, kubelets in node containers, kube-proxy, CoreDNS; a GPU worker whose
GPUs come from our device plugin's DaemonSet) is reached as any existing cluster is: through
the ``ExternalBackend`` on its admin context (preflight, a namespace per test bootstrapped from
``deploy/kubernetes``, the provider acting as that namespace's ServiceAccount, and at the end
the run's objects swept and the leftover line: proof 6, zero remaining run-owned resources).

The proofs are the local plane's scenarios themselves, collected again here so that they run
against this module's fixtures (``backend``, ``admin_client``, ``ledger``, ``real_node``): strict
apply, restart observation from a fresh process, lost-state repair (an out-of-band delete, an
empty backend), foreign field ownership rejection, idempotent deletion, and one replica serving
``/v1/models`` through its Service with the worker key and 401 without it, asked from this host
through the Service's ClusterIP (``up`` routes the Service range to the GPU worker). After the
cluster is deleted the host must be as it was before it started (``hostsnapshot``).

Needs root, Debian's Docker and debootstrap (``hack/host-packages.sh``), the tools families
``kind`` and ``coredns``, and the machine's real-node lock free; skips saying which is missing
(fails under INFERCRANE_REQUIRE_TOOLS=1, as in CI). ``make test`` runs it last, beside the KServe
controller scenarios, once the background ``python -m infercrane_dev.kind prepare`` is done.
"""

from __future__ import annotations

import datetime
import functools
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from infercrane_dev.kind.baseimage import cache_root
from infercrane_dev.kind.cluster import KindRuntime, prepare
from infercrane_dev.kind.clusterconfig import DEFAULT_POOLS, KindSpec
from infercrane_dev.kind.hostchecks import unavailable as kind_unavailable
from infercrane_dev.tests import hostsnapshot
from infercrane_dev.toolchain import find_binary
from infercrane_pulumi.cluster.observe import ReplicaObservation
from infercrane_pulumi.config.intents import MAX_INTENTS, REPLICAS_KEY
from infercrane_pulumi.config.kubeconfigs import SERVICE_ACCOUNT_DIR
from infercrane_pulumi.objects import naming
from tests.conformance import test_lifecycle as lifecycle
from tests.conformance import test_ownership as ownership
from tests.conformance import test_real_node as real_node_scenarios
from tests.conformance.backends import Backend, Tenant, open_backend
from tests.conformance.harness import replica, show, unavailable, wait_for
from tests.conformance.ledger import RunLedger, read_raw
from tests.conformance.realnode import RealNode
from tests.conformance.runnerpod import (
    PROJECT_DIR,
    Runner,
    applied_status,
    stack_document,
    until,
)
from tests.conformance.statepod import StatePod
from tests.conformance.target import ExternalTarget
from tests.conformance.test_real_node import replicas  # noqa: F401  (the fixture, on Kind's GPU worker)

pytestmark = [pytest.mark.conformance, pytest.mark.kind, pytest.mark.timeout(900)]
KUBERNETES_VERSION = "v1.36.3"


@pytest.fixture(scope="module")
def kind_cluster(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KindRuntime]:
    problem = kind_unavailable()
    if problem is not None:
        unavailable(f"no Kind cluster here: {problem}")
    spec = KindSpec(KUBERNETES_VERSION)
    bin_dir = find_binary("kind").parent
    workdir = tmp_path_factory.mktemp("kind")
    runtime = KindRuntime(spec, workdir, cache_root() / "docker")
    prepared = prepare(spec, bin_dir, cache=cache_root(), log=workdir / "debootstrap.log")
    before = hostsnapshot.snapshot()
    runtime.start(prepared, bin_dir)
    steps = ", ".join(f"{step} {seconds}s" for step, seconds in runtime.seconds.items())
    show(pytestconfig, f"Kind cluster {spec.name} ({KUBERNETES_VERSION}) up: {steps}")
    try:
        yield runtime
    finally:
        errors = runtime.teardown()
        assert errors == [], f"the Kind cluster's teardown failed: {errors}"
        # Processes, mounts, links, routes, iptables and nft, tunables, /run, /etc, ...
        assert hostsnapshot.differences(before, hostsnapshot.snapshot()) == {}


@pytest.fixture(scope="module")
def backend(kind_cluster: KindRuntime, pytestconfig: pytest.Config) -> Iterator[Backend]:
    target = ExternalTarget(
        context=kind_cluster.context,
        kubeconfig=str(kind_cluster.kubeconfig),
        install_kserve_crd=False,
        gpu_workload=None,
    )
    with open_backend(target, functools.partial(show, pytestconfig)) as opened:
        yield opened


@pytest.fixture(scope="module")
def admin_client(backend: Backend) -> client.ApiClient:
    return backend.admin


@pytest.fixture(scope="module")
def ledger(backend: Backend) -> RunLedger:
    return backend.ledger


@pytest.fixture(scope="module")
def real_node(kind_cluster: KindRuntime) -> RealNode:
    """Kind's GPU worker, running the stand-in images ``up`` loaded."""
    [pool] = DEFAULT_POOLS
    return RealNode(pool.product, pool.gpus_per_node, kind_cluster.images)


# The proofs, collected again under this module's fixtures.
test_strict_apply = (
    lifecycle.test_strict_apply_preview_writes_nothing_up_applies_under_our_manager_only
)
test_restart_observation = lifecycle.test_restart_observation_from_a_fresh_process_and_workspace
test_lost_state_out_of_band_delete = (
    lifecycle.test_service_deleted_out_of_band_is_reported_degraded_then_recreated
)
test_lost_state_empty_backend = (
    lifecycle.test_lost_pulumi_state_converges_by_taking_back_exactly_ours
)
test_foreign_field_owner = (
    ownership.test_a_foreign_owner_of_our_field_fails_the_run_and_keeps_its_value
)
test_idempotent_deletion = lifecycle.test_removing_an_intent_and_destroy_delete_exactly_ours
test_serving_with_the_worker_key = vars(real_node_scenarios)[
    "test_a_vllm_replica_serves_its_model_through_its_service_and_refuses_without_the_key"
]


# -- the runner, inside the cluster, as the shipped ServiceAccount ------------------------------

# Run in the runner's container: the worker key's Secret read as the runner's identity, the
# answer's typed error (None: it was allowed) as JSON.
SECRET_PROBE = """
import json, sys
from pathlib import Path
from infercrane_pulumi.config import files, kubeconfigs
from infercrane_pulumi.cluster import api, client
settings = files.load_stack_file(Path(sys.argv[1])).kubernetes
cluster = client.connect(kubeconfigs.resolved(settings, None))
path = f"/api/v1/namespaces/{settings.namespace}/secrets/infercrane-worker"
error = api.failure(cluster.transport.request("GET", path), "the worker key's Secret")
print(json.dumps(None if error is None else error.to_record()))
"""


def _applied_keys(admin_client: client.ApiClient, namespace: str) -> list[str]:
    """The external keys of the Deployments InferCrane owns in ``namespace``, read as admin."""
    found = client.AppsV1Api(admin_client).list_namespaced_deployment(
        namespace, label_selector=naming.OWNED_SELECTOR
    )
    return sorted(
        (d.metadata.annotations or {})[naming.ANNOTATION_EXTERNAL_KEY]
        for d in found.items
        if d.metadata
    )


def _kubectl(kind_cluster: KindRuntime) -> list[str]:
    """kubectl as the cluster's admin."""
    config = ("--kubeconfig", str(kind_cluster.kubeconfig), "--context", kind_cluster.context)
    return [str(find_binary("kubectl")), *config]


def _changes(envelope: dict[str, Any]) -> list[tuple[str, str]]:
    assert envelope["ok"], envelope
    return sorted((r["externalKey"], r["change"]) for r in envelope["result"]["replicas"])


# Ten values, each list ten times the one before: 10^8 values once expanded, in 400 bytes.
ALIAS_BOMB = "".join(
    f"  bomb{i}: &bomb{i} [{', '.join([f'*bomb{i - 1}' if i else 'x'] * 10)}]\n" for i in range(8)
)
CONFIGMAP_BYTES = 1 << 20  # what the API server lets a ConfigMap's data hold


@dataclass(frozen=True)
class _Bulk:
    text: str
    intents: int


def _bulk_document(namespace: str, gpu: str, settings: dict[str, Any]) -> _Bulk:
    """A stack file of as many valid intents as fit a ConfigMap, just under 1 MiB."""
    count, text = 0, ""
    while True:
        grown = [replica(f"bulk-{i:05d}", gpu=gpu) for i in range(count + 500)]
        bigger = stack_document(namespace, grown, **settings)
        if len(bigger.encode()) > CONFIGMAP_BYTES - 4096:  # room for the other keys
            return _Bulk(text, count)
        count, text = len(grown), bigger


def _status_after(
    admin_client: client.ApiClient, namespace: str, previous: dict[str, str]
) -> dict[str, str]:
    """The runner's status object's data, read as admin, once it differs from ``previous``
    (the run after it has written it: ``finishedAt`` moves with every run)."""
    core = client.CoreV1Api(admin_client)
    read = functools.partial(core.read_namespaced_config_map, namespace=namespace)

    def changed() -> dict[str, str] | None:
        found = read_raw(read, "infercrane-stack-status")
        data = None if found is None else found.get("data")
        return data if data and data != previous else None

    return wait_for(changed, timeout=60, what="the runner's status written")


def _without_finish(status: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in status.items() if k != "finishedAt"}


def _stack_version(admin_client: client.ApiClient, namespace: str) -> str:
    """The stack ConfigMap's ``resourceVersion`` as the API server holds it now."""
    found = client.CoreV1Api(admin_client).read_namespaced_config_map("infercrane-stack", namespace)
    return str(found.metadata.resource_version)  # type: ignore[union-attr]


def _runner_container(
    admin_client: client.ApiClient, namespace: str, pod: str
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """``pod``'s node, and its runner container's spec and status, read as admin."""
    found = read_raw(
        functools.partial(client.CoreV1Api(admin_client).read_namespaced_pod, namespace=namespace),
        pod,
    )
    assert found is not None, pod
    [spec] = [c for c in found["spec"]["containers"] if c["name"] == "runner"]
    [status] = [c for c in found["status"]["containerStatuses"] if c["name"] == "runner"]
    return found["spec"]["nodeName"], spec, status


def _restarts(admin_client: client.ApiClient, namespace: str, pod: str) -> int:
    return int(_runner_container(admin_client, namespace, pod)[2]["restartCount"])


def _memory_limit(admin_client: client.ApiClient, namespace: str, pod: str) -> int:
    """The runner container's memory limit in bytes (the shipped ``1Gi``)."""
    quantity = _runner_container(admin_client, namespace, pod)[1]["resources"]["limits"]["memory"]
    assert quantity.endswith("Gi"), quantity
    return int(quantity.removesuffix("Gi")) << 30


def _runner_memory_peak(
    kind_cluster: KindRuntime, admin_client: client.ApiClient, runner: Runner, *, reset: bool
) -> int:
    """The runner container's memory high-water mark in bytes, as its memory cgroup counts it
    against the limit (cgroup v1, the kernel's ``memory.max_usage_in_bytes``, read on its
    node); ``reset`` starts it again from what the container holds now."""
    node, _, status = _runner_container(admin_client, runner.namespace, runner.pod())
    container = status["containerID"].partition("://")[2]
    peak = '"$d/memory.max_usage_in_bytes"'
    script = (
        f"d=$(find /sys/fs/cgroup/memory -type d -name '*{container}*' | head -n 1); "
        f'test -n "$d" && {f"echo 0 > {peak} && " if reset else ""}cat {peak}'
    )
    return int(kind_cluster.docker.exec(node, ["sh", "-c", script]))


def _refused_leaving_every_replica(
    kind_cluster: KindRuntime,
    admin_client: client.ApiClient,
    runner: Runner,
    *,
    kept: list[dict[str, Any]],
    settings: dict[str, Any],
    status: dict[str, str],
    applied: dict[str, str],
    pytestconfig: pytest.Config,
) -> dict[str, str]:
    """Runs 3 to 7 of the one-runner scenario, each refused with every replica left as it was
    (``kept`` applied as ``applied``), the status saying why; the status after the last."""
    namespace = runner.namespace
    gpu = kept[0]["gpu"]
    # Issue 60: a stack file that would hand a Pod the runner's own Secret (its state's
    # password), whatever its own policy says, or name the worker key as a model: each
    # refused in one line by the shipped runner (its platform policy, as shipped), and the
    # replica left as it was.
    uids = _owned_uids(admin_client, namespace)
    own_secret = stack_document(
        namespace,
        kept,
        policy={"enforcement": {"secret-reference": "disabled"}},  # its own, turned off
        **settings,
        workerSecretName="infercrane-runner-state",
    )
    named_key = [replica("runner-r0", gpu=gpu, model="$(VLLM_API_KEY)")]
    bulk = _bulk_document(namespace, gpu, settings)
    # Refused as the kubelet's copy says it, before the ConfigMap is read.
    source = f"{PROJECT_DIR}/stacks/{runner.key()}"
    pod = runner.pod()
    peaks = []
    typo = stack_document(namespace, kept, **settings).replace(
        f"{REPLICAS_KEY}:", "infercrane:replica:"
    )
    for seen, document, code, problems in [
        (
            2,
            own_secret,
            "policy-violation",
            ["runner-r0: Secret infercrane-runner-state is the runner's own, never a replica's"],
        ),
        (
            3,
            stack_document(namespace, named_key, **settings),
            "invalid-config",
            [
                "infercrane:replicas[0].model: references $(VLLM_API_KEY); the worker "
                "credential reaches the runtime only through its environment"
            ],
        ),
        # Issue 61: a typo, seen as the status object's error.
        (
            4,
            typo,
            "invalid-config",
            [
                "infercrane:replica: is not a known key; did you mean infercrane:replicas?",
                "infercrane:replicas: is required (missing or null is never read as no "
                "replicas); `[]` with infercrane:allowEmpty: true empties the namespace on "
                "purpose",
            ],
        ),
        # Bounds: a ConfigMap of 1 MiB of intents, and one whose aliases would expand
        # to 10^8 values, each refused before anything is rendered.
        (
            5,
            bulk.text,
            "invalid-config",
            [
                f"infercrane:replicas: Tuple should have at most {MAX_INTENTS} items after "
                f"validation, not {bulk.intents}"
            ],
        ),
        (
            6,
            stack_document(namespace, kept, **settings) + ALIAS_BOMB,
            "invalid-config",
            [
                f"{source}: expands to more than 1,000,000 values (YAML aliases?); write each "
                "value out"
            ],
        ),
    ]:
        _runner_memory_peak(kind_cluster, admin_client, runner, reset=True)
        runner.write(document)
        envelope = runner.run_after(seen)
        assert (envelope["ok"], envelope["error"]) == (
            False,
            {"code": code, "retryable": False, "problems": problems},
        )
        assert _owned_uids(admin_client, namespace) == uids
        peaks.append(_runner_memory_peak(kind_cluster, admin_client, runner, reset=False))
        # The status says why, and still what is applied.
        status = _status_after(admin_client, namespace, status)
        assert _without_finish(status) == applied | {
            "result": "failed",
            "error": code,
            "retryable": "false",
            "problems": "\n".join(problems),
        }
    # The runner lived through them all, in its limit: the same Pod, never restarted.
    limit = _memory_limit(admin_client, namespace, pod)
    assert (runner.pod(), _restarts(admin_client, namespace, pod)) == (pod, 0)
    assert max(peaks) < limit
    show(
        pytestconfig,
        f"runner memory peak (its container's cgroup, limit {limit >> 20} MiB): "
        + ", ".join(
            f"{what} {peak / 2**20:.0f} MiB"
            for what, peak in zip(
                [
                    "own Secret",
                    "$(VLLM_API_KEY)",
                    "typo",
                    f"{len(bulk.text) >> 10} KiB",
                    "aliases",
                ],
                peaks,
                strict=True,
            )
        ),
    )
    return status


def test_the_shipped_runner_applies_its_stack_file_from_inside_the_cluster(
    kind_cluster: KindRuntime,
    observing_tenant: Tenant,
    real_node: RealNode,
    admin_client: client.ApiClient,
    ledger: RunLedger,
    *,
    pytestconfig: pytest.Config,
) -> None:
    """The runner image in the shipped Deployment, as ``infercrane-control-plane`` (the Pod's
    own projected token: no kubeconfig anywhere): two intents applied and ``ready``, one
    removed by editing the stack file, then ``destroy``; and what the Role does not grant,
    refused by the API server and reported typed."""
    namespace = observing_tenant.namespace
    runner = Runner(admin_client, namespace, _kubectl(kind_cluster))
    settings = real_node.settings()
    keys = ["runner-r0", "runner-r1"]
    intents = [replica(key, gpu=real_node.product) for key in keys]
    runner.start(
        kind_cluster.images["runner"],
        stack_document(namespace, intents, **settings),
        passphrase=secrets.token_hex(16),
        labels=ledger.labels,
    )
    assert _changes(runner.run_after(0)) == [(key, "create") for key in keys]
    until(
        lambda: runner.states() == dict.fromkeys(keys, "ready"),
        "both replicas ready, as the runner observes them",
    )

    # The control plane drops one intent: the next run deletes exactly that replica, and the
    # status object says so, with the stack file's version it applied (issue 61).
    status = _status_after(admin_client, namespace, {})
    runner.write(stack_document(namespace, intents[:1], **settings))
    dropped = runner.run_after(1)
    assert _changes(dropped) == [("runner-r0", "same"), ("runner-r1", "delete")]
    assert _applied_keys(admin_client, namespace) == ["runner-r0"]
    status = _status_after(admin_client, namespace, status)
    version = _stack_version(admin_client, namespace)
    assert dropped["result"]["desiredVersion"]["resourceVersion"] == version
    assert status == applied_status(dropped, at=status["finishedAt"])
    applied = _without_finish(status)

    status = _refused_leaving_every_replica(
        kind_cluster,
        admin_client,
        runner,
        kept=intents[:1],
        settings=settings,
        status=status,
        applied=applied,
        pytestconfig=pytestconfig,
    )
    runner.write(stack_document(namespace, intents[:1], **settings))  # the file made good
    assert _changes(runner.run_after(7)) == [("runner-r0", "same")]
    status = _status_after(admin_client, namespace, status)
    assert (status["result"], status["appliedVersion"]) == (
        "applied",
        _stack_version(admin_client, namespace),
    )

    done = runner.cli("destroy")
    assert done.returncode == 0 and json.loads(done.stdout)["ok"], done.stdout + done.stderr
    assert _applied_keys(admin_client, namespace) == []

    # Another namespace: the run is refused before it applies anything, permanent.
    elsewhere = stack_document("default", intents, **settings)
    runner.write(elsewhere, stack="elsewhere")
    refused = runner.cli("up", stack="elsewhere")
    error = json.loads(refused.stdout)["error"]
    assert (refused.returncode, error["code"], error["retryable"]) == (
        1,
        "cluster-forbidden",
        False,
    )
    assert _applied_keys(admin_client, "default") == []
    # A Secret in its own namespace: the Role grants none.
    probe = runner.exec("python3", "-c", SECRET_PROBE, f"{PROJECT_DIR}/stacks/{runner.key()}")
    read = json.loads(probe.stdout)
    assert (read["code"], read["retryable"]) == ("cluster-forbidden", False), probe.stderr


# Run in each runner's container before the stack file gains a key: the moment an engine run
# starts in this container (the plugin among PID 1's descendants; a periodic run of an unchanged
# file starts none, and only the lease's holder runs one), SIGSTOP every process of that run and
# print what it stopped. Polling /proc finds the plugin long before the run's first write,
# however loaded the machine. It gives up once the file DISARM exists (the other runner's,
# before it takes the stack over).
DISARM = "/tmp/freeze-disarmed"
FREEZE = f"""
import json, os, signal, time
from pathlib import Path

def tree():
    children = {{}}
    for entry in (e for e in Path("/proc").iterdir() if e.name.isdecimal()):
        try:
            stat, argv = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except OSError:  # gone since
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append((int(entry.name), argv.split(b"\\0")[0].decode()))
    found, todo = [], [1]
    while todo:
        for pid, command in children.get(todo.pop(), []):
            found.append((pid, command))
            todo.append(pid)
    return found

print("watching", flush=True)
deadline = time.monotonic() + 300
while time.monotonic() < deadline and not Path("{DISARM}").exists():
    run = tree()
    if any(command.endswith("/pulumi-resource-kubernetes") for _, command in run):
        for pid, _ in run:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:  # ended since
                pass
        print(json.dumps(run), flush=True)
        break
    time.sleep(0.02)
else:
    print("[]", flush=True)
"""


def _two_runners_on_postgresql(
    kind_cluster: KindRuntime,
    backend: Backend,
    namespace: str,
    *,
    every: str,
    events: bool = False,
    spread: bool = False,
) -> Runner:
    """The shipped runner's two replicas in ``namespace`` (not started), their state and leases
    on PostgreSQL running as a Pod beside them (``spread``: each runner on a node of its own,
    and PostgreSQL reached by its Service's address, without cluster DNS)."""
    state = StatePod(backend.admin, namespace, by_address=spread)
    state.start(kind_cluster.images["postgres"], backend.ledger.labels)
    return Runner(
        backend.admin,
        namespace,
        _kubectl(kind_cluster),
        replicas=2,
        every=every,
        events=events,
        state_url=state.url,
        state_ca=state.ca,
        spread=spread,
    )


def test_two_runners_on_postgresql_in_the_cluster_converge_after_one_is_killed_mid_run(
    kind_cluster: KindRuntime,
    tenant: Tenant,
    real_node: RealNode,
    backend: Backend,
    pytestconfig: pytest.Config,
) -> None:
    """The shipped Deployment's two replicas, their state and leases on PostgreSQL running as a
    Pod beside them. The stack file gains a key; the Pod whose engine run of it starts is
    frozen there (its envelope not printed), then deleted with a grace period of 0.
    The other runner, waiting on the lease, takes the stack over and converges: each key once.
    (The namespace's deletion removes the rest; the module's leftover check proves it.)"""
    namespace = tenant.namespace
    admin_client, ledger = backend.admin, backend.ledger
    runner = _two_runners_on_postgresql(kind_cluster, backend, namespace, every="30", events=True)
    settings = real_node.settings()
    first = [replica("pair-r0", gpu=real_node.product)]
    runner.start(
        kind_cluster.images["runner"],
        stack_document(namespace, first, **settings),
        passphrase=secrets.token_hex(16),
        labels=ledger.labels,
    )
    runner.pod()  # both running
    pods = runner.pods()
    # Both take their turn at the first file: one creates, the other finds it done.
    seen = {pod: runner.run_after(0, pod=pod) for pod in pods}
    assert sorted(_changes(e)[0][1] for e in seen.values()) == ["create", "same"]
    counts = {pod: len(runner.envelopes(pod)) for pod in pods}
    freezers = {pod: runner.spawn(pod, "python3", "-c", FREEZE) for pod in pods}
    for freezer in freezers.values():
        assert freezer.stdout is not None and freezer.stdout.readline() == "watching\n"
    runner.write(
        stack_document(namespace, [*first, replica("pair-r1", gpu=real_node.product)], **settings)
    )
    victim = wait_for(
        lambda: next((pod for pod, f in freezers.items() if f.poll() is not None), None),
        timeout=240,
        what="a runner's engine run of the new file, frozen",
    )
    [survivor] = [pod for pod in pods if pod != victim]
    assert runner.exec_in(survivor, "python3", "-c", f"open({DISARM!r}, 'w')").returncode == 0
    answers = {pod: f.communicate(timeout=120) for pod, f in freezers.items()}
    assert all(f.returncode == 0 for f in freezers.values()), answers
    stopped = {pod: json.loads(out) for pod, (out, _) in answers.items()}
    assert stopped[victim] and stopped[survivor] == [], stopped
    # Frozen mid-run: its engine had started (under the lease), its envelope of the new file
    # not printed.
    assert not [
        e for e in runner.envelopes(victim) if len(e.get("result", {}).get("replicas", [])) == 2
    ]
    client.CoreV1Api(admin_client).delete_namespaced_pod(victim, namespace, grace_period_seconds=0)
    killed = time.monotonic()

    def converged() -> dict[str, Any] | None:
        return next(
            (
                e
                for e in runner.envelopes(survivor)[counts[survivor] :]
                if e["ok"] and len(e["result"]["replicas"]) == 2
            ),
            None,
        )

    run = wait_for(converged, timeout=360, what="the surviving runner's run of the new file")
    took = time.monotonic() - killed
    changes = dict(_changes(run))
    assert changes.keys() == {"pair-r0", "pair-r1"}
    show(
        pytestconfig,
        f"runner {victim} frozen and killed in its engine run of the new file; {survivor} "
        f"converged {took:.1f}s after ({changes})",
    )
    assert _applied_keys(admin_client, namespace) == ["pair-r0", "pair-r1"]


# -- versions of the stack file: two runners, one of them seeing an old copy --------------------

ORDER_PERIOD = 20  # seconds: every runner runs at least this often


def _owned_uids(admin_client: client.ApiClient, namespace: str) -> dict[str, str]:
    """Each key InferCrane owns a Deployment of in ``namespace``: its uid, read as admin."""
    found = client.AppsV1Api(admin_client).list_namespaced_deployment(
        namespace, label_selector=naming.OWNED_SELECTOR
    )
    return {
        (d.metadata.annotations or {})[naming.ANNOTATION_EXTERNAL_KEY]: str(d.metadata.uid)
        for d in found.items
        if d.metadata
    }


def _held(probe: Any, seconds: float) -> list[Any]:
    """What ``probe`` returned every 2 s for ``seconds``."""
    seen, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(probe())
        time.sleep(2)
    return seen


@dataclass(frozen=True)
class _Placed:
    """A runner's Pod: its name and uid, and the node it runs on."""

    name: str
    uid: str
    node: str

    def envelopes(self, kind_cluster: KindRuntime, namespace: str) -> list[Any]:
        """Its envelopes from its container's log file on its node: readable whatever its
        kubelet does (the CRI format: time, stream, tag, then the line)."""
        logs = f"/var/log/pods/{namespace}_{self.name}_{self.uid}/runner"
        text = kind_cluster.docker.exec(self.node, ["sh", "-c", f"cat {logs}/*.log"])
        lines = (line.split(" ", 3)[3] for line in text.splitlines() if line.count(" ") >= 3)
        return [json.loads(line) for line in lines if line.startswith('{"apiVersion"')]

    def copy(self, kind_cluster: KindRuntime, key: str) -> str:
        """Its kubelet's copy of the ConfigMap's ``key``."""
        volume = f"/var/lib/kubelet/pods/{self.uid}/volumes/kubernetes.io~configmap/stack"
        return kind_cluster.docker.exec(self.node, ["cat", f"{volume}/{key}"])


def _placed(core: client.CoreV1Api, namespace: str, names: list[str]) -> list[_Placed]:
    found = [core.read_namespaced_pod(name, namespace) for name in names]
    return [
        _Placed(str(pod.metadata.name), str(pod.metadata.uid), str(pod.spec.node_name))
        for pod in found
        if pod.metadata and pod.spec
    ]


def _runs_of(envelopes: list[Any], key: str, change: str) -> int:
    return sum(
        (r["externalKey"], r["change"]) == (key, change)
        for e in envelopes
        if e["ok"]
        for r in e["result"]["replicas"]
    )


def _refused(envelopes: list[Any]) -> bool:
    """The last run refused its stack file as invalid."""
    last: dict[str, Any] = envelopes[-1] if envelopes else {"ok": True}
    return not last["ok"] and last["error"]["code"] == "invalid-config"


def test_two_runners_apply_the_newest_stack_file_whatever_their_copy_and_refuse_a_typo(
    kind_cluster: KindRuntime,
    tenant: Tenant,
    real_node: RealNode,
    backend: Backend,
    pytestconfig: pytest.Config,
) -> None:
    """Issue 59, as the how-to runs the runner: two replicas on PostgreSQL, on two nodes. One
    node's kubelet is stopped, so that its runner's copy of the ConfigMap stays the first file.
    The ConfigMap gains a key, then loses another: the new key's Deployment is created once and
    keeps its uid over three periods; the removed one is deleted once and stays gone. Then the
    ConfigMap is replaced by a file with the replicas key misspelt: both runners report it and
    every replica keeps its uid. (Before ``--configmap``, the lagging runner deleted the new
    key at each of its periods.)"""
    namespace = tenant.namespace
    admin_client, ledger = backend.admin, backend.ledger
    core = client.CoreV1Api(admin_client)
    # On two nodes; PostgreSQL by its address: the stopped kubelet's node runs cluster DNS.
    runner = _two_runners_on_postgresql(
        kind_cluster, backend, namespace, every=str(ORDER_PERIOD), spread=True
    )

    def document(*keys: str) -> str:
        intents = [replica(key, gpu=real_node.product) for key in keys]
        return stack_document(namespace, intents, **real_node.settings())

    def publish(text: str) -> None:
        patch = {"data": {runner.key(): text}}
        core.patch_namespaced_config_map("infercrane-stack", namespace, patch)

    def uids() -> dict[str, str]:
        return _owned_uids(admin_client, namespace)

    first = document("order-a", "order-b")
    runner.start(kind_cluster.images["runner"], first, secrets.token_hex(16), ledger.labels)
    runner.pod()
    placed = _placed(core, namespace, runner.pods())
    assert len({pod.node for pod in placed}) == 2, placed
    for pod in placed:
        runner.run_after(0, pod=pod.name)
    applied = wait_for(lambda: uids() if len(uids()) == 2 else None, timeout=120, what="a, b")
    [lagging] = [pod for pod in placed if pod.node.endswith("control-plane")]
    [current] = [pod for pod in placed if pod != lagging]
    kind_cluster.docker.exec(lagging.node, ["systemctl", "stop", "kubelet"])
    try:
        publish(document("order-a", "order-b", "order-c"))
        created = wait_for(lambda: uids().get("order-c"), timeout=120, what="order-c created")
        grown = {**applied, "order-c": created}
        assert all(seen == grown for seen in _held(uids, 3 * ORDER_PERIOD))

        publish(document("order-b", "order-c"))
        wait_for(lambda: "order-a" not in uids(), timeout=120, what="order-a deleted")
        shrunk = {key: uid for key, uid in grown.items() if key != "order-a"}
        assert all(seen == shrunk for seen in _held(uids, 2 * ORDER_PERIOD))

        publish(document("order-b", "order-c").replace(REPLICAS_KEY, "infercrane:replica"))
        wait_for(
            lambda: _refused(lagging.envelopes(kind_cluster, namespace)),
            timeout=120,
            what="the lagging runner's refusal",
        )
        wait_for(lambda: _refused(runner.envelopes(current.name)), timeout=120, what="the other's")
        assert all(seen == shrunk for seen in _held(uids, ORDER_PERIOD))
        assert lagging.copy(kind_cluster, runner.key()) == first  # held back all along
        lagged = lagging.envelopes(kind_cluster, namespace)
    finally:
        kind_cluster.docker.exec(lagging.node, ["systemctl", "start", "kubelet"])
    # Across both runners: the new key created once and never deleted, the removed one deleted
    # once (a run that found it done reports it "same", or no longer names it).
    both = lagged + runner.envelopes(current.name)
    counts = {
        (key, change): _runs_of(both, key, change)
        for key, change in (("order-c", "create"), ("order-c", "delete"), ("order-a", "delete"))
    }
    assert counts == {
        ("order-c", "create"): 1,
        ("order-c", "delete"): 0,
        ("order-a", "delete"): 1,
    }, counts
    show(
        pytestconfig,
        f"runner {lagging.name} on {lagging.node} (kubelet stopped, its copy the first file) "
        f"ran {len(lagged)} times beside {current.name}: {counts}",
    )


# -- the projected token's rotation, over the module's other scenarios ------------------------

# Kubernetes issues no projected token for less than 10 minutes, and the kubelet writes a new
# one at 80% of a token's life: two rotations take about 16 minutes, the second past the first
# token's expiry. The runner that waits for them starts with the module (an autouse fixture), so
# that the scenarios above run meanwhile, and `make test` runs the module beside the wheel's
# Python matrix and the newest CLI's cases (hack/test.sh), so that the wait costs it little.
TOKEN_SECONDS = 600
# Run in the runner's container: the times of the token its file holds now (not the token).
TOKEN_TIMES = f"""
import base64, json
payload = open("{SERVICE_ACCOUNT_DIR / "token"}").read().split(".")[1]
claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
print(json.dumps([claims["iat"], claims["exp"]]))
"""


@pytest.fixture(scope="module", autouse=True)
def rotating(
    kind_cluster: KindRuntime,
    backend: Backend,
    real_node: RealNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Runner]:
    """The runner in a namespace of its own, its token projected for ``TOKEN_SECONDS``, one
    intent that never schedules (it takes no GPU of the other scenarios), a run every 20 s."""
    namespace = backend.tenant(tmp_path_factory.mktemp("rotation")).namespace
    runner = Runner(
        backend.admin, namespace, _kubectl(kind_cluster), every="20", token_seconds=TOKEN_SECONDS
    )
    runner.start(
        kind_cluster.images["runner"],
        stack_document(namespace, [replica("rotation-r0")], **real_node.settings()),
        passphrase=secrets.token_hex(16),
        labels=backend.ledger.labels,
    )
    try:
        yield runner
    finally:
        backend.ledger.delete_namespace(namespace)


def _changed_run(runner: Runner, seen: int) -> dict[str, Any] | None:
    """The first envelope after the ``seen`` first ones of a run that changed something."""
    return next(
        (e for e in runner.envelopes()[seen:] if {c for _, c in _changes(e)} != {"same"}), None
    )


@pytest.mark.timeout(2 * TOKEN_SECONDS + 300)
def test_the_runner_runs_on_across_two_rotations_of_its_projected_token(
    rotating: Runner, real_node: RealNode, pytestconfig: pytest.Config
) -> None:
    """The runner's long-lived loop, with a token of 10 minutes: every run ok while the kubelet
    rotates the token twice, runs after the first token expired included (each run reads the
    file again). After each rotation the stack file changes, so that the engine's plugin
    applies an update with the new token too."""
    runner, settings = rotating, real_node.settings()

    def times() -> tuple[int, int]:
        read = runner.exec("python3", "-c", TOKEN_TIMES)
        assert read.returncode == 0, read.stderr
        issued, expires = json.loads(read.stdout)
        return issued, expires

    def rotated() -> tuple[int, int] | None:
        now = times()
        return now if now != tokens[-1] else None

    # The runs so far, while the module's other scenarios ran: every one ok, the first a create.
    assert _changes(runner.run_after(0)) == [("rotation-r0", "create")]
    assert [e for e in runner.envelopes() if not e["ok"]] == []
    first = times()
    tokens = [first]
    for revision in (1, 2):
        tokens.append(
            wait_for(rotated, timeout=TOKEN_SECONDS, what=f"rotation {revision} of the token")
        )
        changed = replica("rotation-r0", runtimeArgs=[f"--max-num-seqs={revision}"])
        seen = len(runner.envelopes())
        runner.write(stack_document(runner.namespace, [changed], **settings))
        applied = wait_for(
            functools.partial(_changed_run, runner, seen),
            timeout=120,
            what=f"the run of stack file revision {revision}",
        )
        assert _changes(applied) == [("rotation-r0", "update")]
    # The kubelet rotates at 80% of a token's life: the second rotation came after the first
    # token expired, and only a token read again works then.
    assert time.time() > first[1], "the second rotation came before the first token expired"
    runner.run_after(len(runner.envelopes()))  # one more run, with the third token
    envelopes = runner.envelopes()
    assert [e for e in envelopes if not e["ok"]] == []
    issued = ", ".join(f"+{iat - first[0]}s" for iat, _ in tokens)
    show(
        pytestconfig,
        f"{len(envelopes)} runs, every one ok, over tokens issued at {issued} (the first "
        f"expired at +{first[1] - first[0]}s)",
    )
    runner.stop()


# -- a node that goes down, and nodes that restart (last: it restarts the cluster's nodes) -------

# Run in a Pod on a given node: a name resolved by the cluster's DNS, and the replica's Pod
# asked directly; one of the two always crosses to the other node.
REACH = """
import socket, sys, urllib.request
socket.getaddrinfo("kubernetes.default.svc.cluster.local", 443)
urllib.request.urlopen(f"http://{sys.argv[1]}:8000/health", timeout=5).read()
"""


def _reaches(
    admin_client: client.ApiClient, namespace: str, image: str, node: str, pod_ip: str
) -> None:
    """A Pod of the runner image on ``node`` resolves a cluster name and reaches ``pod_ip``."""
    core = client.CoreV1Api(admin_client)
    name = f"reach-{secrets.token_hex(3)}"
    pod: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "reach",
                    "image": image,
                    "command": ["python3", "-c", REACH, pod_ip],
                    "resources": {"limits": {"memory": "128Mi"}},
                }
            ],
        },
    }
    core.create_namespaced_pod(namespace, pod)

    def ended() -> str | None:
        status = core.read_namespaced_pod(name, namespace).status
        return status.phase if status and status.phase in ("Succeeded", "Failed") else None

    phase = wait_for(ended, timeout=120, what=f"the reach Pod on {node} to end")
    log = core.read_namespaced_pod_log(name, namespace)
    core.delete_namespaced_pod(name, namespace)
    assert phase == "Succeeded", f"from {node}: {log[-2000:]}"


def _dns_ready_since(admin_client: client.ApiClient, moment: datetime.datetime) -> bool | None:
    """Every CoreDNS Pod turned Ready after ``moment`` (a status from before a restart would
    still say Ready while the restarted node's CoreDNS is starting)."""
    try:
        pods = client.CoreV1Api(admin_client).list_namespaced_pod(
            "kube-system", label_selector="k8s-app=kube-dns"
        )
    except (urllib3.exceptions.HTTPError, ApiException):  # the API server is starting
        return None
    ready = [
        c.status == "True"
        and c.last_transition_time is not None
        and c.last_transition_time > moment
        for p in pods.items
        for c in (p.status.conditions or [] if p.status else [])
        if c.type == "Ready"
    ]
    return (bool(ready) and all(ready)) or None


def test_a_node_that_goes_down_is_named_and_restarted_nodes_route_again(
    kind_cluster: KindRuntime,
    replicas: real_node_scenarios.Replicas,  # noqa: F811  (the fixture imported above)
    admin_client: client.ApiClient,
) -> None:
    """``docker stop`` of the GPU worker: ``inspect`` names the node that stopped reporting
    (the Pod reader is bound). ``docker start``: the replica serves again, and a Pod on the
    worker reaches cluster DNS on the control plane's node (the routes the node lost with its
    network namespace are back). Then the control plane's node restarts, with the same result
    from a Pod on it, across to the replica's Pod on the worker."""
    key = "restart-r0"
    replicas.stack.ensure([replicas.intent(key)])
    replicas.ready(key)
    nodes = kind_cluster.nodes()
    [control_plane] = [n for n in nodes if n.endswith("control-plane")]
    [worker] = [n for n in nodes if n != control_plane]
    addresses = {node: kind_cluster.node_ip(node) for node in nodes}
    namespace, image = replicas.harness.namespace, kind_cluster.images["runner"]

    def replica_pod_ip() -> str:
        """The replica's serving Pod's address (a Pod of the node's previous life may remain)."""
        pods = replicas.core.list_namespaced_pod(namespace, label_selector=naming.OWNED_SELECTOR)
        [serving] = [
            p.status.pod_ip
            for p in pods.items
            if p.status
            and p.status.pod_ip
            and any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
        ]
        return str(serving)

    kind_cluster.stop_node(worker)
    try:

        def named_down() -> ReplicaObservation | None:
            found = replicas.observe(key)
            return found if found.reason.startswith("NodeNotReady") else None

        down = wait_for(named_down, timeout=180, what=f"inspect naming {worker} down")
    finally:
        kind_cluster.start_node(worker)
    assert down.state == "provisioning" and f"node {worker} stopped reporting" in down.reason
    replicas.ready(key)
    assert replicas.models(key).status == 200
    _reaches(admin_client, namespace, image, worker, replica_pod_ip())

    restarted = datetime.datetime.now(datetime.UTC)
    kind_cluster.stop_node(control_plane)
    kind_cluster.start_node(control_plane)

    def every_node_ready() -> bool | None:
        try:
            found = replicas.core.list_node().items
        except (urllib3.exceptions.HTTPError, ApiException):  # the API server is starting
            return None
        ready = [
            any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
            for n in found
            if n.status
        ]
        return (len(ready) == len(nodes) and all(ready)) or None

    wait_for(every_node_ready, timeout=240, what="the API server back and every node Ready")
    assert {node: kind_cluster.node_ip(node) for node in nodes} == addresses
    wait_for(
        lambda: _dns_ready_since(admin_client, restarted), timeout=180, what="CoreDNS restarted"
    )
    replicas.ready(key)
    _reaches(admin_client, namespace, image, control_plane, replica_pod_ip())
