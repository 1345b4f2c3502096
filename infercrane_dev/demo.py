"""``make demo``: a disposable control plane, the shipped bootstrap, and a real ``pulumi up``.

Starts etcd + kube-apiserver + kube-controller-manager on loopback, applies ``deploy/kubernetes``
as admin, creates the worker Secret without echoing it, then, as the provider identity bound
only to the shipped Role, runs the real Pulumi engine on ``stacks/Pulumi.demo.yaml`` and shows
what it made: every owned object with its field managers and observed state. Tears everything
down unless ``--keep``. The passphrase below protects only this throwaway demo state.
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
from infercrane_dev.localcluster.state import save_state
from infercrane_pulumi import automation
from infercrane_pulumi.cluster import client, doctor, observe
from infercrane_pulumi.intents import StackConfig, load_stack_file

PROJECT_DIR = REPO_ROOT
DEMO_STACK = "demo"
DEMO_PASSPHRASE = "infercrane-demo-only"  # documented; the demo state is thrown away


def show(cluster: client.Cluster, config: StackConfig) -> None:
    print("\nOwned objects, read back from the API server as the provider identity:")
    for entry in observe.observe(cluster, config):
        print(f"  {entry.external_key}: state={entry.state}")
        for obj in entry.objects:
            print(
                f"    {obj.kind}/{obj.name}  managers: {', '.join(obj.field_managers)}  "
                f"conditions: {observe.conditions_summary(obj)}"
            )
    print("  (provisioning: the local control plane has no node, so no GPU Pod can be scheduled)")


def run(*, keep: bool, state_root: Path) -> int:
    bin_dir = find_binary("pulumi").parent
    config = load_stack_file(PROJECT_DIR / "stacks" / f"Pulumi.{DEMO_STACK}.yaml")
    control_plane = LocalControlPlane().start()
    try:
        print(
            f"control plane up in {control_plane.cold_start_seconds:.1f}s at {control_plane.server}"
        )
        with control_plane.api_client(control_plane.admin_context) as admin:
            bootstrap_namespace(admin, config.kubernetes.namespace, deploy_dir=DEPLOY_DIR)
        print("bootstrapped deploy/kubernetes and the worker Secret (value not shown)")
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
        failed = [row for row in rows if row.status != "ok"]
        print(f"doctor as the provider identity: {len(rows) - len(failed)}/{len(rows)} checks ok")
        for row in failed:
            print(f"  FAIL {row.name}: {row.message}")
        stack = automation.open_stack(DEMO_STACK, project_dir=PROJECT_DIR, env=env)
        started = time.monotonic()
        result = automation.up(stack, env, on_output=print)
        print(
            f"\npulumi up: {result.summary.result} in {time.monotonic() - started:.1f}s, "
            f"changes {result.summary.resource_changes}"
        )
        show(provider, config)
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
