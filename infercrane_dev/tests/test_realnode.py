"""A real node on a LocalControlPlane(scheduling=True): its Pods run and answer on a ClusterIP.

As admin: the Node is named after the hostname, carries the product label and the GPU taint
and no simulated-node label, and allocates its GPUs through the device plugin; a Deployment
asking for a GPU runs the stand-in server, turns Ready, and answers GET through its Service's
ClusterIP from the host; a Pod asking for more GPUs than the node has stays Pending with
``Insufficient nvidia.com/gpu``; a second real node on the machine is refused in one line.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster import __main__ as cli
from infercrane_dev.localcluster.hostchecks import unavailable as machine_unfit
from infercrane_dev.localcluster.nodepools import SIMULATED_LABEL
from infercrane_dev.tests.realnode_fixtures import (
    SERVER_IMAGE,
    SERVER_PORT,
    node_spec,
    require_real_node,
)
from tests.conformance.harness import wait_for
from tests.conformance.realnode import http_get

pytestmark = [pytest.mark.conformance, pytest.mark.real_node, pytest.mark.timeout(600)]

GPU = "nvidia.com/gpu"
LABEL = "nvidia.com/gpu.product"
NAMESPACE = "default"


@pytest.fixture(scope="module")
def plane() -> Iterator[LocalControlPlane]:
    require_real_node()
    with LocalControlPlane(scheduling=True, real_node=node_spec()) as started:
        yield started


@pytest.fixture(scope="module")
def core(plane: LocalControlPlane) -> Iterator[client.CoreV1Api]:
    with plane.api_client(plane.admin_context) as api:
        yield client.CoreV1Api(api)


def _any(value: object) -> Any:
    """A client model, read without the generated Optional types (the test asserts instead)."""
    return value


def _pod_spec(image: str, gpus: int) -> dict[str, Any]:
    return {
        "nodeSelector": {LABEL: "NVIDIA-L4"},
        "containers": [
            {
                "name": "server",
                "image": image,
                "args": ["Qwen/Qwen3-0.6B", "--port", str(SERVER_PORT)],
                "ports": [{"containerPort": SERVER_PORT}],
                "readinessProbe": {
                    "httpGet": {"path": "/health", "port": SERVER_PORT},
                    "periodSeconds": 1,
                },
                "resources": {"limits": {GPU: str(gpus)}},
            }
        ],
    }


def test_the_node_is_this_machine_with_its_gpus(
    plane: LocalControlPlane, core: client.CoreV1Api
) -> None:
    assert plane.real_node == socket.gethostname().lower()
    node: Any = core.read_node(str(plane.real_node))
    labels = node.metadata.labels
    assert labels[LABEL] == "NVIDIA-L4"
    assert SIMULATED_LABEL not in labels
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [
        (GPU, "present", "NoSchedule")
    ]
    assert node.status.allocatable[GPU] == "2"
    assert {a.type: a.address for a in node.status.addresses}["InternalIP"] == "10.244.255.1"


def test_a_deployment_runs_and_answers_on_its_cluster_ip(
    plane: LocalControlPlane, core: client.CoreV1Api
) -> None:
    image = plane.node_images[SERVER_IMAGE]
    labels = {"app": "standin"}
    with plane.api_client(plane.admin_context) as api:
        client.AppsV1Api(api).create_namespaced_deployment(
            NAMESPACE,
            {  # type: ignore[arg-type]  # the client takes JSON dicts
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "standin"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": _pod_spec(image, 1)},
                },
            },
        )
        service: Any = core.create_namespaced_service(
            NAMESPACE,
            {  # type: ignore[arg-type]
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "standin"},
                "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": SERVER_PORT}]},
            },
        )
        apps = client.AppsV1Api(api)
        wait_for(
            lambda: (
                (
                    _any(
                        apps.read_namespaced_deployment("standin", NAMESPACE)
                    ).status.ready_replicas
                    or 0
                )
                >= 1
            ),
            timeout=120,
            what="the stand-in Deployment to be Ready",
        )
    cluster_ip = str(service.spec.cluster_ip)

    answer = wait_for(
        lambda: http_get(cluster_ip, 80, "/health"),
        timeout=60,
        what=f"GET http://{cluster_ip}/health",
    )
    status = answer.status
    assert status == 200


def test_more_gpus_than_the_node_has_stays_pending(
    plane: LocalControlPlane, core: client.CoreV1Api
) -> None:
    image = plane.node_images[SERVER_IMAGE]
    core.create_namespaced_pod(
        NAMESPACE,
        {  # type: ignore[arg-type]
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "three-gpus"},
            "spec": _pod_spec(image, 3),
        },
    )

    def unschedulable() -> str | None:
        pod: Any = core.read_namespaced_pod("three-gpus", NAMESPACE)
        for condition in pod.status.conditions or []:
            if condition.type == "PodScheduled" and condition.reason == "Unschedulable":
                return str(condition.message)
        return None

    message = wait_for(unschedulable, timeout=60, what="the 3-GPU Pod to be Unschedulable")
    assert "Insufficient nvidia.com/gpu" in message
    assert _any(core.read_namespaced_pod("three-gpus", NAMESPACE)).status.phase == "Pending"


def test_a_second_real_node_is_refused_in_one_line(
    plane: LocalControlPlane, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = machine_unfit()
    assert problem is not None and str(plane.workdir / "node") in problem
    argv = ["up", "--dir", str(tmp_path / "second"), "--real-node", "NVIDIA-L4=1x1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a real node already runs on this machine" in err
    assert not (tmp_path / "second").exists()
