"""A real node leaves the host as it found it: after stop(), after a start that failed midway,
and after a run killed outright, once the next start has put back what it left.

Each test snapshots the host facts (:mod:`.hostsnapshot`) before starting a control plane with
a real node and compares after it is gone: no process, mount, interface, route, netns, rule,
chain, cgroup, tunable or directory entry may differ.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from infercrane_dev.images import BuiltImage, build_images
from infercrane_dev.localcluster import LocalControlPlane, hostnet, realnode
from infercrane_dev.localcluster.containerd import ImageImportError
from infercrane_dev.localcluster.hostchecks import unavailable as machine_unfit
from infercrane_dev.localcluster.processes import is_alive
from infercrane_dev.tests.hostsnapshot import differences, snapshot
from infercrane_dev.tests.realnode_fixtures import (
    SANDBOX_IMAGE,
    node_spec,
    require_real_node,
)
from tests.conformance.harness import wait_for

pytestmark = [pytest.mark.conformance, pytest.mark.real_node, pytest.mark.timeout(600)]


def _phase(pod: Any) -> str:
    return str(pod.status.phase)


def test_stop_leaves_the_host_as_before() -> None:
    require_real_node()
    before = snapshot()
    with LocalControlPlane(scheduling=True, real_node=node_spec(gpus=1)) as plane:
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
                                "image": plane.node_images[SANDBOX_IMAGE],
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


def test_a_start_that_fails_midway_leaves_the_host_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_real_node()
    before = snapshot()

    def one_archive_damaged(bin_dir: Path, out_dir: Path) -> list[BuiltImage]:
        built = build_images(bin_dir, out_dir)
        [damaged] = [i.archive for i in built if i.name.endswith("/runtime-standin")]
        damaged.write_bytes(damaged.read_bytes()[:4096])
        return built

    # containerd starts, then an image import fails: one line naming the image, and rollback.
    monkeypatch.setattr(realnode, "build_images", one_archive_damaged)
    with pytest.raises(ImageImportError, match=r"^image .*/runtime-standin\.oci\.tar: ") as failed:
        LocalControlPlane(scheduling=True, real_node=node_spec()).start()
    assert "\n" not in str(failed.value)
    assert differences(before, snapshot()) == {}


# A run that starts a plane with a real node, says where, and waits to be killed.
_DOOMED_RUN = """
import time
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.realnodes import RealNodeSpec
plane = LocalControlPlane(scheduling=True, real_node=RealNodeSpec("NVIDIA-L4", 1)).start()
print(plane.workdir, flush=True)
time.sleep(600)
"""


def _kill_everything_started_in(workdir: Path) -> None:
    """SIGKILL every process working in ``workdir``: its daemons, the lock's holder, shims."""
    killed = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if Path(os.readlink(entry / "cwd")).is_relative_to(workdir):
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
    wait_for(
        lambda: not any(is_alive(pid) for pid in killed),
        timeout=30,
        what="the killed run's processes gone",
    )


def test_a_killed_run_is_put_back_by_the_next_start(capsys: pytest.CaptureFixture[str]) -> None:
    require_real_node()
    before = snapshot()
    with subprocess.Popen(
        [sys.executable, "-c", _DOOMED_RUN], stdout=subprocess.PIPE, text=True
    ) as doomed:
        assert doomed.stdout is not None
        workdir = Path(doomed.stdout.readline().strip())
        # As a cancelled CI job or an ended session does: no teardown runs at all.
        doomed.kill()
    try:
        _kill_everything_started_in(workdir)
        assert hostnet.bridge_exists()
        assert machine_unfit() is None  # what it left refuses nothing: the next start fixes it
        with LocalControlPlane(scheduling=True, real_node=node_spec(gpus=1)) as plane:
            name = plane.real_node
        assert capsys.readouterr().err == (
            f"localcluster: put back the real node {name} a killed run left ({workdir / 'node'})\n"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    assert differences(before, snapshot()) == {}
