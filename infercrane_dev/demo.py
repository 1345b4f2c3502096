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
in a throwaway PostgreSQL started for the demo and removed after it. ``--kserve`` (``make demo
KSERVE=1``) also installs KServe v0.20.0 and runs its controller, gives the real node a second
L40S, and runs ``stacks/Pulumi.demo-kserve.yaml`` the same way: the L40S replica once more, as a
KServe InferenceService whose predictor serves on the real node.
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
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infercrane_dev import DEPLOY_DIR, REPO_ROOT
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.localcluster.hostchecks import unavailable
from infercrane_dev.localcluster.nodepools import NodePool
from infercrane_dev.localcluster.realnodes import RealNodeSpec
from infercrane_dev.localcluster.state import save_state
from infercrane_dev.statestores import postgres
from infercrane_dev.toolchain import find_binary
from infercrane_pulumi import automation
from infercrane_pulumi.cli import views
from infercrane_pulumi.cluster import api, client, doctor, observe
from infercrane_pulumi.config.files import load_stack_file, stack_file
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.kinds import SERVICE
from infercrane_pulumi.objects.manifests import Manifest

PROJECT_DIR = REPO_ROOT
DEMO_STACK = "demo"
KSERVE_STACK = "demo-kserve"
DEMO_PASSPHRASE = "infercrane-demo-only"  # documented; the demo state is thrown away
# The real node (or, where it cannot run, a simulated pool) serves each stack's L40S intent; no
# node has the L4 the demo stack's other intent asks for.
L40S = "NVIDIA-L40S"
H100_POOL = NodePool("NVIDIA-H100-80GB-HBM3", nodes=1, gpus_per_node=8)
PRODUCTS_WITH_NODES = frozenset({L40S, H100_POOL.product})
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


def settle(cluster: api.Cluster, config: StackConfig) -> list[observe.ReplicaObservation]:
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


def start_control_plane(*, kserve: bool) -> LocalControlPlane:
    """With the real node (one L40S per stack) where this machine can run one, else a
    simulated L40S pool; with KServe's controller if asked."""
    real_node = RealNodeSpec(L40S, gpus=2 if kserve else 1)
    with_kserve = ", KServe v0.20.0's controller" if kserve else ""
    problem = unavailable()
    if problem is None:
        plane = LocalControlPlane(node_pools=[H100_POOL], real_node=real_node, kserve=kserve)
        plane.start()
        print(
            f"control plane up in {plane.cold_start_seconds:.1f}s at {plane.server}: real node "
            f"{plane.real_node} ({real_node.spec}: kubelet + containerd, Pods really run), "
            f"simulated pool {H100_POOL.spec}{with_kserve}"
        )
        return plane
    simulated = NodePool(L40S, nodes=1, gpus_per_node=real_node.gpus)
    print(f"no real node here ({problem}): a simulated {simulated.spec} node stands in")
    plane = LocalControlPlane(node_pools=[simulated, H100_POOL], kserve=kserve).start()
    print(
        f"control plane up in {plane.cold_start_seconds:.1f}s at {plane.server} with simulated "
        f"GPU node pools {simulated.spec}, {H100_POOL.spec}{with_kserve}"
    )
    return plane


def served_models(admin: api.Cluster, config: StackConfig, worker_key: str) -> list[str]:
    """What the stack's L40S replica answers on ``GET /v1/models`` from this host, through the
    Service its endpoint names (its own, or KServe's predictor), with the worker key and
    without it."""
    [intent] = [i for i in config.replicas if i.gpu == L40S]
    endpoint = urllib.parse.urlsplit(
        workloads.workload_api(config.kubernetes).endpoint(config.kubernetes, intent)
    )
    name = str(endpoint.hostname).split(".")[0]
    service: Manifest | None = admin.get(SERVICE, config.kubernetes.namespace, name)
    assert service is not None, f"no Service {name}"
    address = f"{service['spec']['clusterIP']}:{endpoint.port}"
    lines = [f"{intent.external_key} through Service {name}:"]
    for label, headers in (
        ("with the worker key", {"Authorization": f"Bearer {worker_key}"}),
        ("without it", {}),
    ):
        status, body = _get(address, "/v1/models", headers)
        models = [f"{m.get('id')} (revision {m.get('revision')})" for m in body.get("data", [])]
        shown = ", ".join(models) or (body.get("error") or {}).get("message", "")
        lines.append(f"  GET http://{address}/v1/models {label}: {status} {shown}")
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


def run(*, keep: bool, state_root: Path, backend: str = "file", kserve: bool = False) -> int:
    with contextlib.ExitStack() as services:
        backend_url = (state_root / "state").as_uri()
        if backend == "postgres":
            server = services.enter_context(postgres.running(durable=True))
            print(f"PostgreSQL {server.url} (state and stack leases; password not shown)")
            backend_url = server.url_with_password
        stacks = [DEMO_STACK, KSERVE_STACK] if kserve else [DEMO_STACK]
        return _run(keep=keep, state_root=state_root, backend_url=backend_url, stacks=stacks)


def _run(*, keep: bool, state_root: Path, backend_url: str, stacks: Sequence[str]) -> int:
    control_plane = start_control_plane(kserve=KSERVE_STACK in stacks)
    try:
        env = automation.PulumiEnvironment.for_backend(
            backend_url,
            pulumi_home=PROJECT_DIR / ".infercrane" / "pulumi-home",
            passphrase=DEMO_PASSPHRASE,
            bin_dir=find_binary("pulumi").parent,
            kubeconfig=control_plane.kubeconfig_path,
        )
        for stack in stacks:
            _up_and_show(control_plane, env, stack)
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


def _up_and_show(
    control_plane: LocalControlPlane, env: automation.PulumiEnvironment, stack: str
) -> None:
    """Bootstrap the stack's namespace, run a real ``pulumi up`` of it as the provider, and
    show what it made and what its L40S replica serves."""
    path = stack_file(PROJECT_DIR, stack)
    config = load_stack_file(path)
    namespace, workload_api = config.kubernetes.namespace, config.kubernetes.workload_api
    print(f"\n== stack {stack}: namespace {namespace}, workloadApi {workload_api} ==")
    with control_plane.api_client(control_plane.admin_context) as admin:
        worker_key = bootstrap_namespace(
            admin, namespace, deploy_dir=DEPLOY_DIR, workload_api=workload_api, observe=True
        ).worker_secret_value
    print(
        "bootstrapped deploy/kubernetes (with the optional Pod reader) and the worker Secret "
        "(value not shown)"
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
        path, env, "up", options=automation.RunOptions(on_output=print)
    )
    print(f"\n{views.summary_line(result)} in {time.monotonic() - started:.1f}s")
    for found in result.policy:
        finding = found.finding
        print(f"policy ({finding.enforcement}) {finding.rule}: {finding.message}")
    show(settle(provider, config))
    if control_plane.real_node is not None:
        print("\nThe L40S replica's stand-in server, asked from this host:")
        with control_plane.api_client(control_plane.admin_context) as admin:
            cluster = api.Cluster(client.RestTransport(admin), context="admin")
            for line in served_models(cluster, config, worker_key):
                print(f"  {line}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infercrane_dev.demo")
    parser.add_argument("--keep", action="store_true", help="leave the control plane running")
    parser.add_argument(
        "--backend",
        choices=("file", "postgres"),
        default="file",
        help="Pulumi state in a directory, or in a throwaway PostgreSQL (with stack leases)",
    )
    parser.add_argument(
        "--kserve",
        action="store_true",
        help=f"also run KServe's controller and stacks/Pulumi.{KSERVE_STACK}.yaml",
    )
    args = parser.parse_args(argv)
    if args.keep and args.backend != "file":
        parser.error("--keep keeps the file backend only (the demo's PostgreSQL is removed)")
    state_root = Path(tempfile.mkdtemp(prefix="demo-", dir=_local_dir()))
    return run(keep=args.keep, state_root=state_root, backend=args.backend, kserve=args.kserve)


def _local_dir() -> Path:
    path = PROJECT_DIR / ".infercrane"
    path.mkdir(exist_ok=True)
    return path


if __name__ == "__main__":
    sys.exit(main())
