"""The stage every real-engine measurement stands on, set up once per run.

One local control plane, one Pulumi file backend in a temporary directory, namespaces
bootstrapped from deploy/kubernetes as admin, and the provider identity (bound to the shipped
Role only) for everything measured, as in the conformance suite. The control plane runs without
a scheduler: nothing could be scheduled anyway (no node), and a scheduler retrying N Pending
Pods would only add noise to the API server's numbers.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kubernetes.client import ApiClient

from benchmarks import scenario
from infercrane_dev import DEPLOY_DIR, REPO_ROOT
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.toolchain import find_binary
from infercrane_pulumi import automation
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.client import RestTransport
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.objects import kinds

# What a run needs beyond the control plane's own binaries (checked by LocalControlPlane).
PULUMI_BINARIES = ("pulumi", "pulumi-language-python", "pulumi-resource-kubernetes")
SETTLE_TIMEOUT_SECONDS = 900.0
SETTLE_POLL_SECONDS = 1.0


@dataclass
class Workbench:
    plane: LocalControlPlane
    env: automation.PulumiEnvironment
    root: Path
    admin_api: ApiClient

    @classmethod
    @contextlib.contextmanager
    def open(cls) -> Iterator[Workbench]:
        for name in PULUMI_BINARIES:
            find_binary(name)  # fail before starting anything, naming what is missing
        with (
            tempfile.TemporaryDirectory(prefix="infercrane-bench-") as root,
            LocalControlPlane() as plane,
            plane.api_client(plane.admin_context) as admin_api,
        ):
            env = automation.PulumiEnvironment(
                state_dir=Path(root) / "state",
                pulumi_home=REPO_ROOT / ".infercrane" / "pulumi-home",
                passphrase="benchmark-only",
                bin_dir=find_binary("pulumi").parent,
                kubeconfig=plane.kubeconfig_path,
            )
            yield cls(plane=plane, env=env, root=Path(root), admin_api=admin_api)

    @property
    def server_pids(self) -> tuple[int, ...]:
        return tuple(process.pid for process in self.plane.processes)

    @property
    def admin(self) -> Cluster:
        return Cluster(RestTransport(self.admin_api), context=self.plane.admin_context)

    def namespace(self, name: str) -> KubernetesSettings:
        """Bootstrap ``name`` (idempotent) and return the provider's settings for it."""
        bootstrap_namespace(self.admin_api, name, deploy_dir=DEPLOY_DIR)
        return scenario.settings(self.plane.provider_context, name)

    def workspace(self, stack_name: str) -> Path:
        return self.root / "workspaces" / stack_name

    @contextlib.contextmanager
    def provider_cluster(self) -> Iterator[Cluster]:
        """One persistent client (one connection pool) acting as the provider identity."""
        with self.plane.api_client(self.plane.provider_context) as api:
            yield Cluster(RestTransport(api), context=self.plane.provider_context)

    def state_bytes(self, stack_name: str) -> int:
        """Size of the stack's checkpoint in the file backend."""
        assert self.env.state_dir is not None
        [path] = (self.env.state_dir / ".pulumi" / "stacks").rglob(f"{stack_name}.json")
        return path.stat().st_size

    def settle(self, namespace: str, pods: int, say: Callable[[str], None]) -> None:
        """Wait until the controllers have caught up (``pods`` Pods, and every Deployment's
        status written for them), so one step's background work does not land in the next
        step's numbers."""
        began = time.monotonic()
        while not self._settled(namespace, pods):
            if time.monotonic() - began > SETTLE_TIMEOUT_SECONDS:
                raise TimeoutError(f"{namespace}: not settled after {SETTLE_TIMEOUT_SECONDS}s")
            time.sleep(SETTLE_POLL_SECONDS)
        if (waited := time.monotonic() - began) > SETTLE_POLL_SECONDS:
            say(f"  {namespace}: controllers settled ({pods} Pods) after {waited:.1f} s")

    def _settled(self, namespace: str, pods: int) -> bool:
        if len(self.admin.select(kinds.POD, namespace, "")) != pods:
            return False
        return all(
            (d.get("status") or {}).get("observedGeneration") == d["metadata"].get("generation")
            and (d.get("status") or {}).get("updatedReplicas") == d["spec"].get("replicas")
            for d in self.admin.select(kinds.DEPLOYMENT, namespace, "")
        )
