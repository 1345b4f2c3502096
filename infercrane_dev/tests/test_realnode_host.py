"""A real node leaves the host as it found it: after stop(), and after a start that failed midway.

Each test snapshots the host facts (:mod:`.hostsnapshot`) before starting a control plane with
a real node and compares after it is gone: no process, mount, interface, route, netns, rule,
chain, cgroup, tunable or directory entry may differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.realnode import RealNodeError
from infercrane_dev.tests.hostsnapshot import differences, snapshot
from infercrane_dev.tests.realnode_fixtures import (
    build_node_images,
    node_spec,
    require_real_node,
)
from tests.conformance.harness import wait_for

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(600)]


def _phase(pod: Any) -> str:
    return str(pod.status.phase)


def test_stop_leaves_the_host_as_before(tmp_path: Path) -> None:
    require_real_node()
    images = build_node_images(tmp_path)
    before = snapshot()
    with LocalControlPlane(scheduling=True, real_node=node_spec(images, gpus=1)) as plane:
        # A running Pod: a sandbox, a veth, a netns, mounts, cgroups and conntrack entries.
        with plane.api_client(plane.admin_context) as api:
            core = client.CoreV1Api(api)
            core.create_namespaced_pod(
                "default",
                {  # type: ignore[arg-type]
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "pause"},
                    # A GPU request gets the toleration for the node's GPU taint.
                    "spec": {
                        "containers": [
                            {
                                "name": "pause",
                                "image": images.sandbox,
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ]
                    },
                },
            )
            wait_for(
                lambda: _phase(core.read_namespaced_pod("pause", "default")) == "Running",
                timeout=120,
                what="a Pod running on the real node",
            )
        assert snapshot() != before
    assert differences(before, snapshot()) == {}


def test_a_start_that_fails_midway_leaves_the_host_as_before(tmp_path: Path) -> None:
    require_real_node()
    images = build_node_images(tmp_path)
    before = snapshot()
    # containerd starts and imports the images; the missing sandbox image then stops the start.
    spec = node_spec(images).with_images(
        images.archives, "infercrane.local/none@sha256:" + "0" * 64
    )
    with pytest.raises(RealNodeError, match=r"sandbox image infercrane\.local/none@sha256:0"):
        LocalControlPlane(scheduling=True, real_node=spec).start()
    assert differences(before, snapshot()) == {}
