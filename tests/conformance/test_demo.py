"""The README's main command keeps working: `make demo` runs a real `pulumi up` and cleans up."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from infercrane_dev.localcluster.hostchecks import unavailable
from infercrane_pulumi.cluster.doctor import OWNED_VERBS
from infercrane_pulumi.config.intents import WorkloadApiName
from infercrane_pulumi.objects.kinds import INFERENCE_SERVICE
from infercrane_pulumi.objects.workloads import WORKLOAD_APIS
from tests.conformance.backends import Backend
from tests.conformance.harness import ROOT, require_toolchain

pytestmark = [pytest.mark.conformance, pytest.mark.real_node]
# The demo stack's L40S intent, which the stand-in serves as it was asked to.
REVISION = "9c925d64d72725edaf899c6cb9c377fd0709d9c5"


def run_demo(backend: Backend, *args: str) -> tuple[dict[str, str], bool]:
    """``python -m infercrane_dev.demo *args``: its output per stack (``== stack <name>``
    sections) and whether it ran on the real node; it must succeed and leave nothing."""
    # Not the session's cluster: the demo starts (and stops) a local control plane of its own.
    backend.local("`make demo` runs on a local control plane with simulated GPU nodes")
    bin_dir = require_toolchain()
    # Whether this machine can run the demo's real node; CI's can, so there the demo's replica
    # must really serve (make test runs this before its Kind tests take the machine's lock).
    problem = unavailable()
    if problem is not None and os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
        pytest.fail(f"the demo's real node cannot run here, as CI requires: {problem}")
    real_node = problem is None
    before = set((ROOT / ".infercrane").glob("demo-*"))
    completed = subprocess.run(
        [sys.executable, "-m", "infercrane_dev.demo", *args],
        env=os.environ | {"INFERCRANE_TOOLS_BIN": str(bin_dir)},
        capture_output=True,
        text=True,
        check=False,
        timeout=420,
        cwd=ROOT,
    )
    out = completed.stdout
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    assert "control plane stopped, temporary files removed" in out
    assert set((ROOT / ".infercrane").glob("demo-*")) == before
    if not real_node:
        gpus = 2 if "--kserve" in args else 1
        assert f"a simulated NVIDIA-L40S=1x{gpus} node stands in" in out
    _, *sections = out.split("\n== stack ")
    return {section.split(":", 1)[0]: section for section in sections}, real_node


def doctor_checks(api: WorkloadApiName) -> int:
    """config and api, then per owned kind: its served API (custom ones), each verb, a list and
    (InferenceServices) whether a controller reconciles them; the optional Pod reader."""
    return (
        2
        + 1
        + sum(
            (not kind.builtin) + len(OWNED_VERBS) + 1 + (kind == INFERENCE_SERVICE)
            for kind in WORKLOAD_APIS[api].kinds
        )
    )


def check_demo_stack(out: str, real_node: bool) -> None:
    checks = doctor_checks("deployment")
    assert f"doctor as the provider identity: {checks}/{checks} checks ok" in out
    assert "up demo: 2 to add, 0 to change, 0 to destroy, 0 unchanged in " in out
    assert (
        "policy (advisory) model-name: demo-sglang-r0: model Qwen/Qwen3-0.6B matches none of "
        "Qwen/Qwen3-8B*\n" in out
    )
    owned = [line.strip() for line in out.splitlines() if "managers:" in line]
    assert [line.split("/")[0] for line in owned] == ["Deployment", "Service"] * 2
    assert all("infercrane-provider-v1(Apply)" in line for line in owned)
    assert not any("pulumi-" in line.split("managers:")[1] for line in owned)
    states = [line.strip() for line in out.splitlines() if ": state=" in line]
    assert states[0] == "demo-qwen3-8b-r0: state=ready"
    assert states[1].startswith("demo-sglang-r0: state=provisioning  (Unschedulable: ")
    assert "didn't match Pod's node affinity/selector" in states[1]
    if real_node:  # the replica really runs, and serves
        assert served(out) == SERVED


def served(out: str) -> list[str]:
    return [line.strip().split(": ", 1)[1] for line in out.splitlines() if "/v1/models" in line]


# What the stand-in answers for the L40S replica, with the worker key and without it.
SERVED = [
    f"200 Qwen/Qwen3-8B (revision {REVISION})",
    "401 a valid API key is required (Authorization: Bearer <key>)",
]


def test_demo_applies_under_our_field_manager_and_leaves_nothing(backend: Backend) -> None:
    stacks, real_node = run_demo(backend)
    assert list(stacks) == ["demo"]
    check_demo_stack(stacks["demo"], real_node)


@pytest.mark.kserve_controller
def test_demo_with_kserve_serves_the_l40s_replica_through_kserve_s_predictor_too(
    backend: Backend,
) -> None:
    stacks, real_node = run_demo(backend, "--kserve")
    assert list(stacks) == ["demo", "demo-kserve"]
    check_demo_stack(stacks["demo"], real_node)
    out = stacks["demo-kserve"]
    checks = doctor_checks("kserve")
    assert f"doctor as the provider identity: {checks}/{checks} checks ok" in out
    assert "up demo-kserve: 1 to add, 0 to change, 0 to destroy, 0 unchanged in " in out
    [owned] = [line.strip() for line in out.splitlines() if "managers:" in line]
    assert owned.startswith("InferenceService/")
    # Ours applies the spec; KServe's controller writes the status it reconciled.
    assert "managers: infercrane-provider-v1(Apply), kserve-manager(Update)  " in owned
    states = [line.strip() for line in out.splitlines() if ": state=" in line]
    assert states == ["demo-qwen3-8b-kserve-r0: state=ready"]
    if real_node:  # KServe's predictor runs the stand-in on the real node, and it serves
        assert "demo-qwen3-8b-kserve-r0 through Service infercrane-" in out
        assert served(out) == SERVED
