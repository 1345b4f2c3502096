"""Scheduling onto simulated GPU node pools: real kube-scheduler, real controllers, kwok nodes.

Proves, as admin, what the scenarios rely on: a GPU Deployment lands on a node of its product,
runs, turns Ready after its readiness delay and becomes a ready endpoint of its Service; a
Recreate rollout replaces it; the scheduler's reasons for Pods that cannot fit; a deleted node
takes its Pod with it and the replacement waits for (then lands on) new capacity; and another
process sees the same nodes and Pods.

Every test uses GPU products of its own (random suffix, ``gpus.Pools``), so on a shared session
control plane no test's nodes can attract another test's Pods; each test deletes its nodes at
the end. Local backend only: these tests add and delete nodes.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, utils, watch
from kubernetes.client.exceptions import ApiException

from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.kwok import POD_CIDR
from infercrane_dev.localcluster.nodepools import PoolNode
from infercrane_dev.toolchain import TOOLS_BIN_ENV, repo_root
from tests.conformance.backends import NODES_REASON, Backend
from tests.conformance.gpus import Pools
from tests.conformance.harness import require_toolchain, show, wait_for
from tests.conformance.ledger import RunLedger

pytestmark = pytest.mark.conformance

GPU = "nvidia.com/gpu"
LABEL = "nvidia.com/gpu.product"
IMAGE = "registry.example/runtime@sha256:" + "ab" * 32
PORT = 8000
# A readiness probe like the product's (periodSeconds 5): kwok makes the Pod Ready that long
# after it started running.
PROBE_PERIOD = 5
# The pod garbage collector waits ~40 s before deleting Pods of a vanished node.
POD_GC_DEADLINE = 180


@pytest.fixture(scope="module")
def plane(backend: Backend) -> LocalControlPlane:
    return backend.local(NODES_REASON)


@pytest.fixture(scope="module")
def admin(plane: LocalControlPlane) -> Iterator[client.ApiClient]:
    with plane.api_client(plane.admin_context) as api:
        yield api


@pytest.fixture
def namespace(admin: client.ApiClient, ledger: RunLedger) -> Iterator[str]:
    name = ledger.create_namespace("sched")
    core = client.CoreV1Api(admin)

    def default_account() -> bool:
        # Bare Pods are refused until the service-account controller created "default".
        try:
            core.read_namespaced_service_account("default", name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    wait_for(default_account, timeout=60, what=f"service account default in {name}")
    yield name
    ledger.delete_namespace(name)


def _container(gpus: int) -> dict[str, Any]:
    return {
        "name": "runtime",
        "image": IMAGE,
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": PROBE_PERIOD,
        },
        "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
    }


def _pod_spec(product: str, gpus: int = 1) -> dict[str, Any]:
    # No tolerations: the ExtendedResourceToleration admission plugin must add them.
    return {
        "nodeSelector": {LABEL: product},
        "terminationGracePeriodSeconds": 30,
        "containers": [_container(gpus)],
    }


def _deployment(name: str, product: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": _pod_spec(product)},
        },
    }


def _service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "selector": {"app": name},
            "ports": [{"name": "http", "port": PORT, "targetPort": "http"}],
        },
    }


def _bare_pod(name: str, product: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": _pod_spec(product, gpus),
    }


def _json(api: client.ApiClient, obj: object) -> Any:
    """An API object as the API's JSON (dicts), which is simpler to assert on than models."""
    return api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]


def _create(api: client.ApiClient, namespace: str, manifest: dict[str, Any]) -> None:
    utils.create_from_dict(api, manifest, namespace=namespace)  # type: ignore[no-untyped-call]


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = pod.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == kind), {})


def _is_ready(pod: dict[str, Any]) -> bool:
    return _condition(pod, "Ready").get("status") == "True"


def _name(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _pods(api: client.ApiClient, namespace: str, app: str) -> list[dict[str, Any]]:
    listed = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=f"app={app}")
    return list(_json(api, listed)["items"])


def _ready_pod(api: client.ApiClient, namespace: str, app: str) -> dict[str, Any] | None:
    """The one Pod of ``app`` once it is Running and Ready and nothing else is left."""
    pods = _pods(api, namespace, app)
    if len(pods) != 1:
        return None
    pod = pods[0]
    live = "deletionTimestamp" not in pod["metadata"]
    running = pod.get("status", {}).get("phase") == "Running"
    return pod if live and running and _is_ready(pod) else None


def _ready_endpoints(api: client.ApiClient, namespace: str, service: str) -> list[tuple[str, str]]:
    """(address, Pod name) of every ready endpoint of ``service``."""
    slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}"
    )
    return sorted(
        (address, endpoint.get("targetRef", {}).get("name", ""))
        for endpoint_slice in _json(api, slices)["items"]
        for endpoint in endpoint_slice.get("endpoints") or []
        if endpoint.get("conditions", {}).get("ready")
        for address in endpoint["addresses"]
    )


def _unschedulable(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The Pod's PodScheduled condition once the scheduler gave up on it, else None."""
    pod = _json(api, client.CoreV1Api(api).read_namespaced_pod(name, namespace))
    condition = _condition(pod, "PodScheduled")
    failed = condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
    return condition if failed else None


def _watch_until_ready(api: client.ApiClient, namespace: str, since: str) -> list[tuple[str, bool]]:
    """(phase, ready) of every state the namespace's Pods went through, until one was Ready.

    A watch delivers every change after ``since`` in order, so a short-lived state cannot be
    missed the way polling could miss it.
    """
    states: list[tuple[str, bool]] = []
    stream = watch.Watch()  # type: ignore[no-untyped-call]
    for event in stream.stream(  # type: ignore[no-untyped-call]
        client.CoreV1Api(api).list_namespaced_pod,
        namespace,
        resource_version=since,
        timeout_seconds=120,
    ):
        pod = _json(api, event["object"])
        state = (str(pod.get("status", {}).get("phase", "")), _is_ready(pod))
        if not states or states[-1] != state:
            states.append(state)
        if state[1]:
            stream.stop()  # type: ignore[no-untyped-call]
    return states


def test_gpu_deployment_runs_becomes_ready_and_an_endpoint(
    plane: LocalControlPlane, admin: client.ApiClient, namespace: str, pools: Pools
) -> None:
    nodes = pools.add("NVIDIA-L40S", 2, 1)
    product = pools.product("NVIDIA-L40S")
    assert nodes == [f"gpu-nvidia-l40s-{pools.suffix}-0", f"gpu-nvidia-l40s-{pools.suffix}-1"]
    assert plane.pool_nodes(product) == [
        PoolNode(name=name, product=product, gpus=1, ready=True, schedulable=True) for name in nodes
    ]
    # Watch from before the Deployment exists, so every state of its Pod is seen, in order.
    since = _json(admin, client.CoreV1Api(admin).list_namespaced_pod(namespace))["metadata"]
    _create(admin, namespace, _deployment("runtime", product))
    _create(admin, namespace, _service("runtime"))
    states = _watch_until_ready(admin, namespace, since["resourceVersion"])
    # Bound and started (Running, not Ready: kwok's readiness delay), then Ready.
    assert states[-2:] == [("Running", False), ("Running", True)]
    pod = wait_for(lambda: _ready_pod(admin, namespace, "runtime"), timeout=60, what="a Ready pod")
    assert pod["spec"]["nodeName"] in nodes
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(POD_CIDR)
    # Added by the ExtendedResourceToleration admission plugin; the nodes' taint needs it.
    assert [t for t in pod["spec"]["tolerations"] if t["key"] == GPU] == [
        {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
    ]
    endpoints = wait_for(
        lambda: _ready_endpoints(admin, namespace, "runtime"),
        timeout=60,
        what="the EndpointSlice to list the Pod as ready",
    )
    assert endpoints == [(pod["status"]["podIP"], _name(pod))]

    # Recreate rollout: the old Pod goes away (its graceful delete completes), a new one runs.
    client.AppsV1Api(admin).patch_namespaced_deployment(
        "runtime",
        namespace,
        {"spec": {"template": {"metadata": {"annotations": {"rollout": "2"}}}}},
    )

    def replaced() -> dict[str, Any] | None:
        current = _ready_pod(admin, namespace, "runtime")
        return current if current is not None and _name(current) != _name(pod) else None

    new_pod = wait_for(replaced, timeout=120, what="the Recreate rollout's Ready Pod")
    assert new_pod["spec"]["nodeName"] in nodes
    new_endpoints = wait_for(
        lambda: [e for e in _ready_endpoints(admin, namespace, "runtime") if e not in endpoints],
        timeout=60,
        what="the EndpointSlice to list the new Pod",
    )
    assert new_endpoints == [(new_pod["status"]["podIP"], _name(new_pod))]
    assert _ready_endpoints(admin, namespace, "runtime") == new_endpoints
    deployment = client.AppsV1Api(admin).read_namespaced_deployment_status("runtime", namespace)
    status = _json(admin, deployment)["status"]
    assert (status["readyReplicas"], status["updatedReplicas"]) == (1, 1)


def test_pod_for_a_product_without_nodes_stays_pending(
    admin: client.ApiClient, namespace: str, pools: Pools
) -> None:
    pools.add("NVIDIA-L40S", 1, 1)
    _create(admin, namespace, _bare_pod("lost", pools.product("NVIDIA-B200"), 1))
    condition = wait_for(
        lambda: _unschedulable(admin, namespace, "lost"), timeout=60, what="the scheduler's verdict"
    )
    assert "didn't match Pod's node affinity/selector" in condition["message"]
    pod = _json(admin, client.CoreV1Api(admin).read_namespaced_pod("lost", namespace))
    assert (pod["status"]["phase"], pod["spec"].get("nodeName")) == ("Pending", None)


def test_more_gpus_than_a_node_has_is_insufficient(
    admin: client.ApiClient, namespace: str, pools: Pools
) -> None:
    pools.add("NVIDIA-L4", 1, 1)
    _create(admin, namespace, _bare_pod("greedy", pools.product("NVIDIA-L4"), 2))
    condition = wait_for(
        lambda: _unschedulable(admin, namespace, "greedy"),
        timeout=60,
        what="the scheduler's verdict",
    )
    assert f"Insufficient {GPU}" in condition["message"]


def test_gpu_taint_keeps_other_pods_off(
    admin: client.ApiClient, namespace: str, pools: Pools
) -> None:
    pools.add("NVIDIA-A10G", 1, 1)
    pod = _bare_pod("cpu-only", pools.product("NVIDIA-A10G"), 1)
    del pod["spec"]["containers"][0]["resources"]  # no GPU request, so no toleration is added
    _create(admin, namespace, pod)
    condition = wait_for(
        lambda: _unschedulable(admin, namespace, "cpu-only"),
        timeout=60,
        what="the scheduler's verdict",
    )
    # The pool's node matches the selector; its only taint is nvidia.com/gpu=present.
    assert "1 node(s) had untolerated taint(s)" in condition["message"]


def _second_process(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=repo_root(),
        env={**os.environ, TOOLS_BIN_ENV: str(require_toolchain())},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cli(*argv: str) -> str:
    return _second_process("-m", "infercrane_dev.localcluster", *argv)


_POD_READER = """
import json, sys
from kubernetes import client
from infercrane_dev.localcluster import new_api_client
with new_api_client(sys.argv[1], "infercrane-admin") as api:
    pods = client.CoreV1Api(api).list_namespaced_pod(sys.argv[2]).items
    print(json.dumps(sorted([p.metadata.name, p.spec.node_name, p.status.phase] for p in pods)))
"""


def test_deleting_a_node_takes_its_pod_and_a_second_process_sees_it(
    plane: LocalControlPlane,
    admin: client.ApiClient,
    namespace: str,
    pools: Pools,
    pytestconfig: pytest.Config,
) -> None:
    (first,) = pools.add("NVIDIA-H100-80GB-HBM3", 1, 8)
    product = pools.product("NVIDIA-H100-80GB-HBM3")
    _create(admin, namespace, _deployment("runtime", product))
    pod = wait_for(lambda: _ready_pod(admin, namespace, "runtime"), timeout=120, what="a Ready pod")
    assert pod["spec"]["nodeName"] == first
    kubeconfig = str(plane.kubeconfig_path)

    listed = _cli("nodes", "--kubeconfig", kubeconfig, "--product", product)
    assert listed.splitlines()[1:] == [f"{first:<40} {product:<32} {8:>4} yes"]
    seen = json.loads(_second_process("-c", _POD_READER, kubeconfig, namespace))
    assert seen == [[_name(pod), first, "Running"]]

    # Another process deletes the node; the pod garbage collector then deletes its Pod, and
    # the ReplicaSet's replacement has nowhere to go.
    assert _cli("delete-node", first, "--kubeconfig", kubeconfig).strip() == f"deleted node {first}"
    assert plane.pool_nodes(product) == []

    def replacement_pending() -> dict[str, Any] | None:
        pods = _pods(admin, namespace, "runtime")
        if len(pods) != 1 or _name(pods[0]) == _name(pod):
            return None
        return pods[0] if _unschedulable(admin, namespace, _name(pods[0])) else None

    pending = wait_for(
        replacement_pending, timeout=POD_GC_DEADLINE, what="the Pod to go with its node"
    )
    show(pytestconfig, f"replacement {_name(pending)} is Pending without a node, as expected")
    seen = json.loads(_second_process("-c", _POD_READER, kubeconfig, namespace))
    assert seen == [[_name(pending), None, "Pending"]]

    # New capacity, added by another process, lets the replacement run.
    added = _cli("add-pool", "--node-pool", f"{product}=1x8", "--kubeconfig", kubeconfig)
    # Numbering continues after the existing nodes; with none left it starts again at 0.
    second = f"gpu-nvidia-h100-80gb-hbm3-{pools.suffix}-0"
    assert added.strip() == f"added {product}=1x8: {second}"
    rescheduled = wait_for(
        lambda: _ready_pod(admin, namespace, "runtime"), timeout=120, what="the replacement to run"
    )
    assert (_name(rescheduled), rescheduled["spec"]["nodeName"]) == (_name(pending), second)


def _heartbeat(api: client.ApiClient, node: str) -> str:
    status = _json(api, client.CoreV1Api(api).read_node(node))["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    return str(ready["lastHeartbeatTime"])


def test_kwok_keeps_nodes_alive_with_heartbeats_and_a_lease(
    admin: client.ApiClient, pools: Pools
) -> None:
    (node,) = pools.add("NVIDIA-T4", 1, 1)
    first = _heartbeat(admin, node)
    # The node-heartbeat Stage refreshes the conditions every 30-35 s.
    later = wait_for(
        lambda: (beat := _heartbeat(admin, node)) != first and beat,
        timeout=90,
        what=f"a heartbeat of {node}",
    )
    assert str(later) > first  # RFC 3339 UTC timestamps order as strings
    # Like a kubelet, kwok holds a Lease per node (its holder is kwok's own id).
    lease = client.CoordinationV1Api(admin).read_namespaced_lease(node, "kube-node-lease")
    spec = _json(admin, lease)["spec"]
    assert spec["leaseDurationSeconds"] == 40
    assert spec["holderIdentity"] and spec["renewTime"]


def test_ready_after_annotation_overrides_the_probe_delay(
    admin: client.ApiClient, namespace: str, pools: Pools
) -> None:
    pools.add("NVIDIA-L4", 2, 1)
    product = pools.product("NVIDIA-L4")
    stuck = _bare_pod("stuck", product, 1)
    stuck["metadata"]["annotations"] = {"infercrane.dev/simulated-ready-after": "8760h"}
    _create(admin, namespace, stuck)
    prompt = _bare_pod("prompt", product, 1)
    del prompt["spec"]["containers"][0]["readinessProbe"]  # no probe: Ready as soon as running
    _create(admin, namespace, prompt)
    core = client.CoreV1Api(admin)

    def read(name: str) -> dict[str, Any]:
        return dict(_json(admin, core.read_namespaced_pod(name, namespace)))

    def running(name: str) -> dict[str, Any] | None:
        pod = read(name)
        return pod if pod["status"].get("phase") == "Running" else None

    wait_for(
        lambda: _is_ready(read("prompt")), timeout=60, what="the Pod without a probe to be Ready"
    )
    # Created first, running as well, and a year away from Ready.
    pod = wait_for(lambda: running("stuck"), timeout=60, what="the annotated Pod to run")
    assert not _is_ready(pod)
    assert _condition(pod, "Ready")["reason"] == "ContainersNotReady"
