"""Replicas on a real node: what a Pod we render does when a kubelet really runs it.

The local control plane's real node (kubelet + containerd + runc, kube-proxy, GPUs from a device
plugin) runs the stand-in servers, which keep the real images' launch contracts (see
``infercrane_dev/images/README.md``). Every scenario drives the control plane's door
(``NamespaceStack``, the one run path) as the provider identity, reads observation as the control
plane would, and asks the replica itself from this host through its Service's ClusterIP. What a
stand-in proves and does not: the qualification table (docs/explanation/qualification.md).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.cluster.observe import ReplicaObservation
from infercrane_pulumi.config.intents import ReplicaIntent
from infercrane_pulumi.objects import naming
from tests.conformance.backends import Tenant
from tests.conformance.harness import Harness, intent, wait_for
from tests.conformance.realnode import Answer, RealNode, get, wait_ready

pytestmark = [pytest.mark.conformance, pytest.mark.real_node]

READY_SECONDS = 180
ENDPOINT_SECONDS = 30
WATCH_SECONDS = 2
MODEL = "Qwen/Qwen3-0.6B"


@dataclass
class Replicas:
    """One test's stack on the real node, and the ways to look at its replicas."""

    harness: Harness
    node: RealNode
    stack: NamespaceStack
    worker_key: str
    core: client.CoreV1Api  # as admin

    def intent(self, key: str, **extra: Any) -> ReplicaIntent:
        return intent(key, gpu=self.node.product, **extra)

    def observe(self, key: str) -> ReplicaObservation:
        [found] = self.stack.observe(key)
        return found

    def ready(self, key: str) -> ReplicaObservation:
        return wait_ready(
            lambda: self.observe(key), timeout=READY_SECONDS, what=f"{key} ready on the real node"
        )

    def get(self, key: str, path: str, *, port: int = 8000, token: str = "") -> Answer | None:
        where = self.harness.admin, self.harness.namespace, key
        return get(*where, path=path, port=port, token=token)

    def answer(self, key: str, path: str, **kwargs: Any) -> Answer:
        """The first answer through the Service: kube-proxy programs a new endpoint within
        about a second of the Pod turning ready (its sync period), so allow for that lag."""
        return wait_for(
            lambda: self.get(key, path, **kwargs),
            timeout=ENDPOINT_SECONDS,
            what=f"{key} answering {path} through its Service",
        )

    def models(self, key: str, **kwargs: Any) -> Answer:
        return self.answer(key, "/v1/models", token=self.worker_key, **kwargs)

    def standin(self, key: str, *, port: int = 8000) -> dict[str, Any]:
        answer = self.answer(key, "/standin", port=port)
        assert answer.status == 200, answer
        facts: dict[str, Any] = answer.body
        return facts


@pytest.fixture
def replicas(
    observing_harness: Harness,
    observing_tenant: Tenant,
    real_node: RealNode,
    admin_client: client.ApiClient,
    tmp_path: Path,
) -> Iterator[Replicas]:
    """A stack of the stand-in images on the real node; destroyed after the test, and its Pods
    waited out, so the next scenario finds every GPU free."""
    made = Replicas(
        observing_harness,
        real_node,
        observing_harness.namespace_stack(tmp_path / "workspace", **real_node.settings()),
        observing_tenant.bootstrapped.worker_secret_value,
        client.CoreV1Api(admin_client),
    )
    yield made
    made.stack.destroy()
    wait_for(
        lambda: not made.core.list_namespaced_pod(observing_harness.namespace).items or None,
        timeout=120,
        what="the scenario's Pods gone (GPUs free)",
    )


def test_a_vllm_replica_serves_its_model_through_its_service_and_refuses_without_the_key(
    replicas: Replicas,
) -> None:
    key = "real-vllm-r0"
    result = replicas.stack.ensure([replicas.intent(key, modelRevision="r1")])
    assert [r.change for r in result.replicas] == ["create"]
    assert replicas.ready(key).endpoint == result.replicas[0].endpoint

    answer = replicas.models(key)
    assert answer.status == 200
    [model] = answer.body["data"]
    assert (model["id"], model["root"], model["revision"]) == (MODEL, MODEL, "r1")
    assert replicas.answer(key, "/v1/models").status == 401
    facts = replicas.standin(key)
    # The default container's argv as the server parsed it, and the key from the Secret.
    assert facts["form"] == "vllm-api-server"
    assert facts["argv"][:3] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert (facts["model"], facts["port"], facts["key_configured"]) == (MODEL, 8000, True)


def test_a_model_named_after_a_variable_reaches_the_runtime_to_the_letter(
    replicas: Replicas,
) -> None:
    """Kubernetes expands ``$(NAME)`` in a container's argv from its environment: a model named
    ``$(VLLM_API_KEY)`` once started the runtime with the worker key as its model. A
    credential's name is now refused before anything runs (``test_config_validation``); any
    other variable of the container (``HF_HOME``, set by a model cache) must reach it to the
    letter. A real kubelet starts the stand-in here, which reports the argv it was given."""
    key = "real-literal-r0"
    cached = replicas.node.settings(modelCache={"sizeLimit": "1Gi"})
    replicas.stack = replicas.harness.namespace_stack(replicas.stack.workspace, **cached)
    named, revision = "$(HF_HOME)", "$(HF_HOME)$$"
    replicas.stack.ensure([replicas.intent(key, model=named, modelRevision=revision)])
    replicas.ready(key)
    facts = replicas.standin(key)
    assert facts["model"] == named
    assert facts["argv"][3:] == [
        *("--model", named, "--host", "0.0.0.0", "--port", "8000", "--revision", revision),
    ]


def test_a_custom_workload_in_the_sglang_form_serves_on_its_own_port(replicas: Replicas) -> None:
    key = "real-sglang-r0"
    workload = {
        "image": replicas.node.runtime_image,
        "command": [
            *("python3", "-m", "sglang.launch_server", "--model-path", "${MODEL}"),
            *("--host", "0.0.0.0", "--port", "${PORT}"),
        ],
        "port": 30000,
    }
    replicas.stack.ensure([replicas.intent(key, workload=workload)])
    replicas.ready(key)
    answer = replicas.answer(key, "/v1/models", port=30000)
    assert answer.status == 200
    assert [m["id"] for m in answer.body["data"]] == [MODEL]
    facts = replicas.standin(key, port=30000)
    assert (facts["form"], facts["port"]) == ("sglang", 30000)


def test_shm_size_mounts_a_memory_backed_dev_shm_of_that_size(replicas: Replicas) -> None:
    key = "real-shm-r0"
    stack = replicas.harness.namespace_stack(
        replicas.stack.workspace, **replicas.node.settings(shmSize="64Mi")
    )
    replicas.stack = stack
    stack.ensure([replicas.intent(key)])
    replicas.ready(key)
    assert replicas.standin(key)["dev_shm_bytes"] == 64 * 1024 * 1024


def test_a_container_that_exits_at_start_is_never_ready_and_says_why(replicas: Replicas) -> None:
    key = "real-crash-r0"
    # The server refuses an extra positional argument (exit 2), as vLLM's parser does.
    replicas.stack.ensure([replicas.intent(key, runtimeArgs=["unexpected-positional"])])
    seen: list[ReplicaObservation] = []

    def crash_looping() -> ReplicaObservation | None:
        found = replicas.observe(key)
        seen.append(found)
        return found if "CrashLoopBackOff" in found.reason else None

    found = wait_for(crash_looping, timeout=READY_SECONDS, what=f"{key} in CrashLoopBackOff")
    assert found.state in ("provisioning", "failed")
    assert "(last exit code 2: Error)" in found.reason
    assert [s.state for s in seen if s.state == "ready"] == []


def test_more_intents_than_gpus_leave_one_provisioning_and_no_gpu_is_shared(
    replicas: Replicas,
) -> None:
    keys = [f"real-gpu-r{i}" for i in range(replicas.node.gpus + 1)]
    replicas.stack.ensure([replicas.intent(k) for k in keys])

    def settled() -> list[ReplicaObservation] | None:
        found = replicas.stack.observe()
        states = sorted(o.state for o in found)
        return found if states == ["provisioning"] + ["ready"] * replicas.node.gpus else None

    found = wait_for(settled, timeout=READY_SECONDS, what="every GPU taken, one replica waiting")
    [waiting] = [o for o in found if o.state == "provisioning"]
    assert "Insufficient nvidia.com/gpu" in waiting.reason
    devices = [
        replicas.standin(o.external_key)["nvidia_visible_devices"]
        for o in found
        if o.state == "ready"
    ]
    assert sorted(devices) == [f"gpu-{i}" for i in range(replicas.node.gpus)]


@dataclass(frozen=True)
class PodEvent:
    kind: str  # ADDED | MODIFIED | DELETED
    name: str
    pod: Any


@contextmanager
def pod_events(core: client.CoreV1Api, namespace: str, selector: str) -> Iterator[list[PodEvent]]:
    """Every change of the selected Pods while the block runs, in the API's order: the Pods
    listed first (as ADDED), then watch events from that list's resourceVersion on, in short
    watches so that the recorder stops soon after the block."""
    events: list[PodEvent] = []
    failures: list[BaseException] = []
    done = threading.Event()
    listed: Any = core.list_namespaced_pod(namespace, label_selector=selector)
    events += [PodEvent("ADDED", pod.metadata.name, pod) for pod in listed.items]
    version = listed.metadata.resource_version

    def record() -> None:
        nonlocal version
        try:
            while not done.is_set():
                for event in watch.Watch().stream(  # type: ignore[no-untyped-call]
                    core.list_namespaced_pod,
                    namespace,
                    label_selector=selector,
                    resource_version=version,
                    timeout_seconds=WATCH_SECONDS,
                ):
                    pod = event["object"]
                    events.append(PodEvent(event["type"], pod.metadata.name, pod))
                    version = pod.metadata.resource_version
        except BaseException as failure:  # reported by the test's thread
            failures.append(failure)

    recorder = threading.Thread(target=record, daemon=True)
    recorder.start()
    try:
        yield events
    finally:
        done.set()
        recorder.join(timeout=4 * WATCH_SECONDS)
    assert not recorder.is_alive() and failures == [], failures


def _terminated(pod: Any) -> Any:
    statuses = pod.status.container_statuses or []
    return next((s.state.terminated for s in statuses if s.state and s.state.terminated), None)


def _running_since(pod: Any) -> datetime | None:
    statuses = pod.status.container_statuses or []
    started = [s.state.running.started_at for s in statuses if s.state and s.state.running]
    return started[0] if started else None


def test_a_revision_change_stops_the_old_server_before_the_new_one_starts(
    replicas: Replicas,
) -> None:
    key = "real-rollout-r0"
    # A short drain after SIGTERM, so the old Pod is visibly terminating for a while.
    args = ["--standin-shutdown-seconds", "2"]
    replicas.stack.ensure([replicas.intent(key, modelRevision="r1", runtimeArgs=args)])
    replicas.ready(key)
    assert replicas.models(key).body["data"][0]["revision"] == "r1"

    selector = f"{naming.LABEL_INSTANCE}={naming.object_name(key)}"
    samples: list[tuple[str, str | None]] = []  # (observed state, revision served just after)
    with pod_events(replicas.core, replicas.harness.namespace, selector) as events:
        replicas.stack.ensure([replicas.intent(key, modelRevision="r2", runtimeArgs=args)])

        def sample() -> bool | None:
            state = replicas.observe(key).state
            answer = replicas.get(key, "/v1/models", token=replicas.worker_key)
            served = answer.body["data"][0]["revision"] if answer and answer.status == 200 else None
            samples.append((state, served))
            return (state == "ready" and served == "r2") or None

        wait_for(sample, timeout=READY_SECONDS, what=f"{key} ready on revision r2")

    # `ready` is never reported while the old revision serves. Nothing answering is no
    # counterexample: kube-proxy programs the new Pod's endpoint about a second after it turned
    # ready (seen in CI once, as ("ready", None)); that lag is Kubernetes', not the rollout's.
    assert [s for s in samples if s[0] == "ready" and s[1] not in ("r2", None)] == []
    assert samples[-1] == ("ready", "r2")
    old = {e.name for e in events if e.kind == "DELETED"}
    assert len(old) == 1, [(e.kind, e.name) for e in events]
    [new] = {e.name for e in events} - old
    # The old server got SIGTERM and exited cleanly (not SIGKILLed) before the Deployment
    # controller even created the new Pod (Recreate waits for the old Pod to end).
    ends = [i for i, e in enumerate(events) if e.name in old and _terminated(e.pod)]
    assert ends, "the old container's end was not seen"
    ended = _terminated(events[ends[0]].pod)
    assert (ended.exit_code, ended.message.startswith("received SIGTERM at ")) == (0, True)
    created = next(i for i, e in enumerate(events) if e.name == new and e.kind == "ADDED")
    assert ends[0] < created
    # ... so two servers never ran at once.
    started = [_running_since(e.pod) for e in events if e.name == new and _running_since(e.pod)]
    assert started and started[0] >= ended.finished_at
