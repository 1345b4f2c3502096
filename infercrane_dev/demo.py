"""``make demo``: a disposable control plane, the shipped bootstrap, and a real ``pulumi up``.

Starts etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on loopback with
two simulated GPU node pools, applies ``deploy/kubernetes`` as admin, creates the worker Secret
without echoing it, then, as the provider identity bound only to the shipped Roles, runs the
real Pulumi engine on ``stacks/Pulumi.demo.yaml`` and shows what it made: every owned object
with its field managers, and each replica's observed state (one ready on a simulated L40S node,
one provisioning with the scheduler's reason). Tears everything down unless ``--keep``.
The passphrase below protects only this throwaway demo state.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from infercrane_dev import DEPLOY_DIR, REPO_ROOT
from infercrane_dev.localcluster import LocalControlPlane, find_binary
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.localcluster.nodepools import NodePool
from infercrane_dev.localcluster.state import save_state
from infercrane_pulumi import automation, views
from infercrane_pulumi.cluster import client, doctor, observe
from infercrane_pulumi.intents import StackConfig, load_stack_file, stack_file

PROJECT_DIR = REPO_ROOT
DEMO_STACK = "demo"
DEMO_PASSPHRASE = "infercrane-demo-only"  # documented; the demo state is thrown away
# One pool serves the demo's L40S intent; no pool has the L4 its other intent asks for.
POOLS = (
    NodePool("NVIDIA-L40S", nodes=1, gpus_per_node=1),
    NodePool("NVIDIA-H100-80GB-HBM3", nodes=1, gpus_per_node=8),
)
POOL_PRODUCTS = frozenset(pool.product for pool in POOLS)
SETTLE_SECONDS = 90


def show(found: Sequence[observe.ReplicaObservation]) -> None:
    print("\nOwned objects, read back from the API server as the provider identity:")
    for entry in found:
        print(
            f"  {entry.external_key}: state={entry.state}"
            + (f"  ({entry.reason})" * bool(entry.reason))
        )
        for obj in entry.objects:
            print(
                f"    {obj.kind}/{obj.name}  managers: {', '.join(obj.field_managers)}  "
                f"conditions: {observe.conditions_summary(obj)}"
            )


def settle(cluster: client.Cluster, config: StackConfig) -> list[observe.ReplicaObservation]:
    """Observe until every replica whose GPU product has a node is ready (or time runs out)."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        found = observe.observe(cluster, config)
        gpus = {i.external_key: i.gpu for i in config.replicas}
        waiting = [o for o in found if o.state != "ready" and gpus[o.external_key] in POOL_PRODUCTS]
        if not waiting or time.monotonic() > deadline:
            return found
        time.sleep(1)


def run(*, keep: bool, state_root: Path) -> int:
    bin_dir = find_binary("pulumi").parent
    config = load_stack_file(stack_file(PROJECT_DIR, DEMO_STACK))
    control_plane = LocalControlPlane(node_pools=POOLS).start()
    try:
        print(
            f"control plane up in {control_plane.cold_start_seconds:.1f}s at {control_plane.server}"
            f" with simulated GPU node pools {', '.join(pool.spec for pool in POOLS)}"
        )
        with control_plane.api_client(control_plane.admin_context) as admin:
            bootstrap_namespace(
                admin, config.kubernetes.namespace, deploy_dir=DEPLOY_DIR, observe=True
            )
        print(
            "bootstrapped deploy/kubernetes (with the optional Pod reader) and the worker Secret "
            "(value not shown)"
        )
        env = automation.PulumiEnvironment(
            state_dir=state_root / "state",
            pulumi_home=PROJECT_DIR / ".infercrane" / "pulumi-home",
            passphrase=DEMO_PASSPHRASE,
            bin_dir=bin_dir,
            kubeconfig=control_plane.kubeconfig_path,
        )
        settings = config.kubernetes.model_copy(
            update={"kubeconfig": str(control_plane.kubeconfig_path)}
        )
        provider = client.connect(settings)
        rows = doctor.doctor(provider, settings)
        failed = [row for row in rows if row.status == "fail"]
        print(f"doctor as the provider identity: {len(rows) - len(failed)}/{len(rows)} checks ok")
        for row in failed:
            print(f"  FAIL {row.name}: {row.message}")
        started = time.monotonic()
        result = automation.run_stack_file(
            stack_file(PROJECT_DIR, DEMO_STACK),
            env,
            "up",
            options=automation.RunOptions(on_output=print),
        )
        print(f"\n{views.summary_line(result)} in {time.monotonic() - started:.1f}s")
        show(settle(provider, config))
        if keep:
            state = control_plane.detach()
            save_state(state_root / "localcluster", state)
            print(
                f"\nkept: KUBECONFIG={control_plane.kubeconfig_path}; stop with "
                f"`python -m infercrane_dev.localcluster down --dir "
                f"{state_root / 'localcluster'}`"
            )
        return 0
    finally:
        if control_plane.running:
            control_plane.stop()
            shutil.rmtree(state_root, ignore_errors=True)
            print("control plane stopped, temporary files removed")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infercrane_dev.demo")
    parser.add_argument("--keep", action="store_true", help="leave the control plane running")
    args = parser.parse_args(argv)
    state_root = Path(tempfile.mkdtemp(prefix="demo-", dir=_local_dir()))
    return run(keep=args.keep, state_root=state_root)


def _local_dir() -> Path:
    path = PROJECT_DIR / ".infercrane"
    path.mkdir(exist_ok=True)
    return path


if __name__ == "__main__":
    sys.exit(main())
