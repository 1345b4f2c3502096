"""The README's main command keeps working: `make demo` runs a real `pulumi up` and cleans up."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from infercrane_dev.localcluster.hostchecks import unavailable
from infercrane_pulumi.cluster.doctor import OWNED_VERBS
from infercrane_pulumi.workloads import WORKLOAD_APIS
from tests.conformance.backends import Backend
from tests.conformance.harness import ROOT, require_toolchain

pytestmark = pytest.mark.conformance
# The demo stack's L40S intent, which the stand-in serves as it was asked to.
REVISION = "9c925d64d72725edaf899c6cb9c377fd0709d9c5"


def test_demo_applies_under_our_field_manager_and_leaves_nothing(backend: Backend) -> None:
    # Not the session's cluster: the demo starts (and stops) a local control plane of its own.
    backend.local("`make demo` runs on a local control plane with simulated GPU nodes")
    bin_dir = require_toolchain()
    real_node = unavailable() is None  # whether this machine can run the demo's real node
    before = set((ROOT / ".infercrane").glob("demo-*"))
    completed = subprocess.run(
        [sys.executable, "-m", "infercrane_dev.demo"],
        env=os.environ | {"INFERCRANE_TOOLS_BIN": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=ROOT,
    )
    out = completed.stdout
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    # config, api, each verb + a list per owned kind, and the optional Pod reader (bound here)
    checks = 2 + sum(len(OWNED_VERBS) + 1 for _ in WORKLOAD_APIS["deployment"].kinds) + 1
    assert f"doctor as the provider identity: {checks}/{checks} checks ok" in out
    assert "up demo: 2 to add, 0 to change, 0 to destroy, 0 unchanged in " in out
    owned = [line.strip() for line in out.splitlines() if "managers:" in line]
    assert [line.split("/")[0] for line in owned] == ["Deployment", "Service"] * 2
    assert all("infercrane-provider-v1(Apply)" in line for line in owned)
    assert not any("pulumi-" in line.split("managers:")[1] for line in owned)
    states = [line.strip() for line in out.splitlines() if ": state=" in line]
    assert states[0] == "demo-qwen3-8b-r0: state=ready"
    assert states[1].startswith("demo-sglang-r0: state=provisioning  (Unschedulable: ")
    assert "didn't match Pod's node affinity/selector" in states[1]
    if real_node:  # the replica really runs, and serves
        served = [line.strip() for line in out.splitlines() if "/v1/models" in line]
        assert [line.split(": ", 1)[1] for line in served] == [
            f"200 Qwen/Qwen3-8B (revision {REVISION})",
            "401 a valid API key is required (Authorization: Bearer <key>)",
        ]
    else:
        assert "a simulated NVIDIA-L40S=1x1 node stands in" in out
    assert "control plane stopped, temporary files removed" in out
    assert set((ROOT / ".infercrane").glob("demo-*")) == before
