"""Pods that run: intents on GPU nodes, observed the way the control plane observes them.

Locally the nodes are simulated pools (kube-scheduler + kwok) of GPU products each test has to
itself, so the pools one test adds never serve another test's intents. Scenarios that add or
delete nodes need that (local only); the one that just needs some schedulable GPU node also
runs on an existing cluster that has one (see ``gpus.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.cluster.observe import ReplicaObservation
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.gpus import GpuSupply, Pools
from tests.conformance.harness import Harness, intent, wait_for
from tests.conformance.test_cli_and_faults import cli_env

pytestmark = pytest.mark.conformance
SETTLE = 120  # seconds: scheduling, kwok's stages and the readiness delay, on a busy machine


def states(stack: NamespaceStack) -> dict[str, tuple[str, str]]:
    return {o.external_key: (o.state, o.reason) for o in stack.observe()}


def until_state(
    stack: NamespaceStack, key: str, state: str, *, contains: str = ""
) -> ReplicaObservation:
    def reached() -> ReplicaObservation | None:
        [found] = stack.observe(key)
        return found if found.state == state and contains in found.reason else None

    return wait_for(reached, timeout=SETTLE, what=f"{key} {state} {contains!r}")


def pods_of(admin_client: client.ApiClient, namespace: str, key: str) -> list[Any]:
    selector = f"{naming.LABEL_KEY_HASH}={naming.key_hash(key)}"
    return list(
        client.CoreV1Api(admin_client).list_namespaced_pod(namespace, label_selector=selector).items
    )


def inspect_in_a_fresh_process(harness: Harness, workspace: Path) -> list[dict[str, Any]]:
    completed = harness.cli(
        "inspect",
        "--stack",
        harness.stack_name,
        "--project-dir",
        str(workspace),
        "--json",
        env=cli_env(harness),  # it reads what the stack applied from the backend
    )
    assert completed.returncode == 0, completed.stderr
    result: list[dict[str, Any]] = json.loads(completed.stdout)["result"]
    return result


def test_an_intent_on_its_pool_becomes_ready_and_its_service_lists_the_pod(
    observing_harness: Harness, admin_client: client.ApiClient, gpu: GpuSupply, tmp_path: Path
) -> None:
    harness, target = observing_harness, gpu.schedulable("NVIDIA-L40S")
    stack = harness.namespace_stack(tmp_path / "ws", **target.settings())
    stack.ensure([intent("ready-r0", gpu=target.product, **target.intent_fields())])

    until_state(stack, "ready-r0", "ready")
    [fresh] = inspect_in_a_fresh_process(harness, tmp_path / "ws")
    assert (fresh["externalKey"], fresh["state"]) == ("ready-r0", "ready")

    [pod] = pods_of(admin_client, harness.namespace, "ready-r0")
    assert pod.spec.node_name in target.nodes
    slices = client.DiscoveryV1Api(admin_client).list_namespaced_endpoint_slice(
        harness.namespace,
        label_selector=f"kubernetes.io/service-name={naming.object_name('ready-r0')}",
    )
    ready = [
        address
        for item in slices.items
        for endpoint in item.endpoints or []
        if endpoint.conditions and endpoint.conditions.ready
        for address in endpoint.addresses
    ]
    assert ready == [pod.status.pod_ip]


def test_a_product_without_nodes_stays_provisioning_until_its_pool_appears(
    observing_harness: Harness, admin_client: client.ApiClient, pools: Pools, tmp_path: Path
) -> None:
    harness = observing_harness
    pools.add("NVIDIA-L40S", nodes=1, gpus=8)
    missing = pools.product("NVIDIA-H100")
    stack = harness.namespace_stack(tmp_path / "ws")
    stack.ensure([intent("h100-r0", gpu=missing)])

    waiting = until_state(stack, "h100-r0", "provisioning", contains="node affinity/selector")
    assert waiting.reason.startswith("Unschedulable: ")
    # Never substituted: the free L40S GPUs stay unused.
    [pod] = pods_of(admin_client, harness.namespace, "h100-r0")
    assert pod.spec.node_name is None

    pools.add("NVIDIA-H100", nodes=1, gpus=1)
    until_state(stack, "h100-r0", "ready")  # without another up
    [pod] = pods_of(admin_client, harness.namespace, "h100-r0")
    assert pod.spec.node_name in {n.name for n in pools.nodes("NVIDIA-H100")}


def test_more_intents_than_gpus_leave_the_extras_provisioning(
    observing_harness: Harness, pools: Pools, tmp_path: Path
) -> None:
    harness = observing_harness
    pools.add("NVIDIA-L4", nodes=1, gpus=2)
    stack = harness.namespace_stack(tmp_path / "ws")
    keys = ["fill-r0", "fill-r1", "fill-r2"]
    stack.ensure([intent(k, gpu=pools.product("NVIDIA-L4")) for k in keys])

    def settled() -> dict[str, tuple[str, str]] | None:
        found = states(stack)
        counted = sorted(state for state, _ in found.values())
        return found if counted == ["provisioning", "ready", "ready"] else None

    found = wait_for(settled, timeout=SETTLE, what="two ready, one provisioning")
    [(_, reason)] = [v for v in found.values() if v[0] == "provisioning"]
    assert "Insufficient nvidia.com/gpu" in reason


def test_a_revision_change_recreates_without_two_pods_and_never_reports_the_old_one_ready(
    observing_harness: Harness, admin_client: client.ApiClient, pools: Pools, tmp_path: Path
) -> None:
    # Local only: two GPUs on one node, so a second Pod could run if Recreate were broken, and
    # a runtime whose argv carries the revision, so the new Pod is told apart from the old.
    harness = observing_harness
    pools.add("NVIDIA-A100", nodes=1, gpus=2)
    gpu = pools.product("NVIDIA-A100")
    stack = harness.namespace_stack(tmp_path / "ws")
    stack.ensure([intent("roll-r0", gpu=gpu, modelRevision="rev-1")])
    until_state(stack, "roll-r0", "ready")

    stack.ensure([intent("roll-r0", gpu=gpu, modelRevision="rev-2")])
    deadline, seen_ready = time.monotonic() + SETTLE, False
    while not seen_ready:
        assert time.monotonic() < deadline, "rev-2 never became ready"
        running = [
            p
            for p in pods_of(admin_client, harness.namespace, "roll-r0")
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None
        ]
        assert len(running) <= 1, [p.metadata.name for p in running]
        [observed] = stack.observe("roll-r0")
        if observed.state == "ready":
            # Ready must mean rev-2 serves: the one running Pod carries the new revision.
            [pod] = running or pods_of(admin_client, harness.namespace, "roll-r0")
            assert "rev-2" in pod.spec.containers[0].args
            seen_ready = True
        time.sleep(0.2)


def test_losing_the_node_leaves_ready_and_capacity_coming_back_restores_it(
    observing_harness: Harness, pools: Pools, tmp_path: Path
) -> None:
    harness = observing_harness
    [node] = pools.add("NVIDIA-L40S", nodes=1, gpus=1)
    stack = harness.namespace_stack(tmp_path / "ws")
    stack.ensure([intent("lost-r0", gpu=pools.product("NVIDIA-L40S"))])
    until_state(stack, "lost-r0", "ready")

    pools.delete(node)
    # The pod garbage collector removes the Pod of a vanished node after its quarantine.
    until_state(stack, "lost-r0", "provisioning", contains="Unschedulable")
    pools.add("NVIDIA-L40S", nodes=1, gpus=1)
    until_state(stack, "lost-r0", "ready")
    assert harness.owned(kinds.DEPLOYMENT)  # nothing of ours was re-applied or lost
