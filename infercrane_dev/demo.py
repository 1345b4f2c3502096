"""``make demo``: a disposable control plane, the shipped bootstrap, and a real ``pulumi up``.

Starts etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok on loopback, with
this machine as a **real node** (kubelet, containerd) holding one NVIDIA-L40S GPU and a
simulated H100 pool; applies ``deploy/kubernetes`` as admin, creates the worker Secret without
echoing it, then, as the provider identity bound only to the shipped Roles, runs the real
Pulumi engine on ``stacks/Pulumi.demo.yaml`` (whose images are the stand-in servers the node
holds) and shows what it made: every owned object with its field managers, each replica's
observed state (the L40S one ready on the real node, the L4 one provisioning with the
scheduler's reason), and the served model fetched from the host through the L40S replica's
Service, with the worker key and without it. Where a real node cannot run here (not root, no
cgroups, ...), one line says why and a simulated L40S node stands in. Tears everything down
unless ``--keep``. The passphrase below protects only this throwaway demo state.
``--backend postgres`` (``make demo BACKEND=postgres``) keeps that state, and the stack's lease,
in a throwaway PostgreSQL started for the demo and removed after it.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infercrane_dev import DEPLOY_DIR, REPO_ROOT
from infercrane_dev.localcluster import LocalControlPlane, find_binary
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.localcluster.hostchecks import unavailable
from infercrane_dev.localcluster.nodepools import NodePool
from infercrane_dev.localcluster.realnodes import RealNodeSpec
from infercrane_dev.localcluster.state import save_state
from infercrane_dev.statestores import postgres
from infercrane_pulumi import automation, naming, views
from infercrane_pulumi.cluster import client, doctor, observe
from infercrane_pulumi.config_files import load_stack_file, stack_file
from infercrane_pulumi.intents import StackConfig
from infercrane_pulumi.kinds import SERVICE

PROJECT_DIR = REPO_ROOT
DEMO_STACK = "demo"
DEMO_PASSPHRASE = "infercrane-demo-only"  # documented; the demo state is thrown away
REAL_NODE_KEY = "demo-qwen3-8b-r0"  # the demo stack's L40S intent
# The real node (or, where it cannot run, a simulated pool) serves the demo's L40S intent; no
# node has the L4 its other intent asks for.
REAL_NODE = RealNodeSpec("NVIDIA-L40S", gpus=1)
SIMULATED_L40S = NodePool(REAL_NODE.product, nodes=1, gpus_per_node=REAL_NODE.gpus)
H100_POOL = NodePool("NVIDIA-H100-80GB-HBM3", nodes=1, gpus_per_node=8)
PRODUCTS_WITH_NODES = frozenset({REAL_NODE.product, H100_POOL.product})
SETTLE_SECONDS = 120
HTTP_TIMEOUT_SECONDS = 10
ENDPOINT_SECONDS = 30


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
        waiting = [
            o for o in found if o.state != "ready" and gpus[o.external_key] in PRODUCTS_WITH_NODES
        ]
        if not waiting or time.monotonic() > deadline:
            return found
        time.sleep(1)


def start_control_plane() -> LocalControlPlane:
    """With the real node where this machine can run one, else a simulated L40S pool."""
    problem = unavailable()
    if problem is None:
        plane = LocalControlPlane(node_pools=[H100_POOL], real_node=REAL_NODE).start()
        print(
            f"control plane up in {plane.cold_start_seconds:.1f}s at {plane.server}: real node "
            f"{plane.real_node} ({REAL_NODE.spec}: kubelet + containerd, Pods really run), "
            f"simulated pool {H100_POOL.spec}"
        )
        return plane
    print(f"no real node here ({problem}): a simulated {SIMULATED_L40S.spec} node stands in")
    plane = LocalControlPlane(node_pools=[SIMULATED_L40S, H100_POOL]).start()
    print(
        f"control plane up in {plane.cold_start_seconds:.1f}s at {plane.server} with simulated "
        f"GPU node pools {SIMULATED_L40S.spec}, {H100_POOL.spec}"
    )
    return plane


def served_models(
    admin: client.Cluster, config: StackConfig, key: str, worker_key: str
) -> list[str]:
    """What the replica of ``key`` answers on ``GET /v1/models`` from this host, through its
    Service's ClusterIP: with the worker key, and without it."""
    [intent] = [i for i in config.replicas if i.external_key == key]
    service = admin.get(SERVICE, config.kubernetes.namespace, naming.object_name(key))
    assert service is not None
    address = f"{service['spec']['clusterIP']}:{intent.effective_port}"
    lines = []
    for label, headers in (
        ("with the worker key", {"Authorization": f"Bearer {worker_key}"}),
        ("without it", {}),
    ):
        status, body = _get(address, "/v1/models", headers)
        models = [f"{m.get('id')} (revision {m.get('revision')})" for m in body.get("data", [])]
        shown = ", ".join(models) or (body.get("error") or {}).get("message", "")
        lines.append(f"GET http://{address}/v1/models {label}: {status} {shown}")
    return lines


def _get(address: str, path: str, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    # kube-proxy programs a new endpoint about a second after its Pod turns ready.
    deadline = time.monotonic() + ENDPOINT_SECONDS
    while True:
        connection = http.client.HTTPConnection(address, timeout=HTTP_TIMEOUT_SECONDS)
        try:
            connection.request("GET", path, headers=headers)
            answer = connection.getresponse()
            return answer.status, json.loads(answer.read() or b"{}")
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
        finally:
            connection.close()


def run(*, keep: bool, state_root: Path, backend: str = "file") -> int:
    with contextlib.ExitStack() as services:
        backend_url = (state_root / "state").as_uri()
        if backend == "postgres":
            server = services.enter_context(postgres.running(durable=True))
            print(f"PostgreSQL {server.url} (state and stack leases; password not shown)")
            backend_url = server.url_with_password
        return _run(keep=keep, state_root=state_root, backend_url=backend_url)


def _run(*, keep: bool, state_root: Path, backend_url: str) -> int:
    bin_dir = find_binary("pulumi").parent
    config = load_stack_file(stack_file(PROJECT_DIR, DEMO_STACK))
    control_plane = start_control_plane()
    try:
        with control_plane.api_client(control_plane.admin_context) as admin:
            worker_key = bootstrap_namespace(
                admin, config.kubernetes.namespace, deploy_dir=DEPLOY_DIR, observe=True
            ).worker_secret_value
        print(
            "bootstrapped deploy/kubernetes (with the optional Pod reader) and the worker Secret "
            "(value not shown)"
        )
        env = automation.PulumiEnvironment.for_backend(
            backend_url,
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
        found = settle(provider, config)
        show(found)
        if control_plane.real_node is not None:
            print("\nThe L40S replica's stand-in server, asked from this host through its Service:")
            with control_plane.api_client(control_plane.admin_context) as admin:
                cluster = client.Cluster(client.RestTransport(admin), context="admin")
                for line in served_models(cluster, config, REAL_NODE_KEY, worker_key):
                    print(f"  {line}")
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
    parser.add_argument(
        "--backend",
        choices=("file", "postgres"),
        default="file",
        help="Pulumi state in a directory, or in a throwaway PostgreSQL (with stack leases)",
    )
    args = parser.parse_args(argv)
    if args.keep and args.backend != "file":
        parser.error("--keep keeps the file backend only (the demo's PostgreSQL is removed)")
    state_root = Path(tempfile.mkdtemp(prefix="demo-", dir=_local_dir()))
    return run(keep=args.keep, state_root=state_root, backend=args.backend)


def _local_dir() -> Path:
    path = PROJECT_DIR / ".infercrane"
    path.mkdir(exist_ok=True)
    return path


if __name__ == "__main__":
    sys.exit(main())
