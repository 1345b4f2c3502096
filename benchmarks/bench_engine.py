"""Real-engine cost of a stack with N intents on the local control plane: create, no-op, destroy.

Run: .venv/bin/python -m benchmarks.bench_engine [N ...] (needs `make tools`)
Writes benchmarks/results/engine.{json,svg}. Not a test: nothing asserts a duration.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from benchmarks.plot import save
from infercrane_dev import DEPLOY_DIR
from infercrane_dev.localcluster import LocalControlPlane, find_binary
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_pulumi import automation
from infercrane_pulumi.cluster.client import Cluster, RestTransport
from tests.conformance.harness import ROOT, Harness, replica


def measure(
    plane: LocalControlPlane, env: automation.PulumiEnvironment, n: int
) -> dict[str, float]:
    namespace = f"bench-{n}"
    with plane.api_client(plane.admin_context) as admin:
        bootstrap_namespace(admin, namespace, deploy_dir=DEPLOY_DIR)
        harness = Harness(
            plane,
            env,
            namespace,
            Path(tempfile.mkdtemp(prefix="bench-")),
            Cluster(RestTransport(admin)),
        )
        harness.configure([replica(f"bench-{n}-r{i}") for i in range(n)])
        timings = {}
        for step, run in (
            ("create", harness.up),
            ("no-op", harness.up),
            ("destroy", harness.destroy),
        ):
            started = time.perf_counter()
            run()
            timings[step] = time.perf_counter() - started
    return timings


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [1, 5, 20, 50]
    with tempfile.TemporaryDirectory() as state, LocalControlPlane() as plane:
        env = automation.PulumiEnvironment(
            state_dir=Path(state),
            pulumi_home=ROOT / ".infercrane" / "pulumi-home",
            passphrase="benchmark-only",
            bin_dir=find_binary("pulumi").parent,
            kubeconfig=plane.kubeconfig_path,
        )
        results = {n: measure(plane, env, n) for n in sizes}
    save(
        "engine",
        results,
        title="pulumi up/destroy vs intents (local API server)",
        y_label="seconds",
    )
    for n, r in results.items():
        print(f"N={n:3d}  " + "  ".join(f"{k} {v:6.2f}s" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
