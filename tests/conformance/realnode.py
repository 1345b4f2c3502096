"""The suite's real node, and what its scenarios ask of it from this host.

On the local backend the session's control plane gains one real node (kubelet + containerd,
:mod:`infercrane_dev.localcluster.realnode`) for the scenarios of one module, removed after
them; it runs the stand-in images (:mod:`infercrane_dev.images`). Scenarios
reach a replica the way a client would: from this host, through its Service's ClusterIP
(kube-proxy's rules), with or without the worker key.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.realnodes import RealNodeSpec
from infercrane_dev.tests.realnode_fixtures import require_real_node
from infercrane_pulumi import automation
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.cluster.observe import ReplicaObservation
from infercrane_pulumi.objects import kinds, naming
from tests.conformance.harness import ENGINE_BINARIES, ROOT, require_toolchain, wait_for

SPEC = RealNodeSpec("NVIDIA-L4", gpus=2)
# What one stand-in replica asks of the node: Burstable like the defaults (which are sized for
# a real vLLM and do not fit a 2-core machine), small enough that every GPU's replica fits.
STANDIN_RESOURCES = {"cpuRequest": "100m", "memoryRequest": "64Mi", "memoryLimit": "256Mi"}
HTTP_TIMEOUT_SECONDS = 5


@dataclass(frozen=True)
class RealNode:
    product: str
    gpus: int
    images: Mapping[str, str]  # catalog name -> digest-pinned reference

    @property
    def vllm_image(self) -> str:
        return self.images["vllm-openai-standin"]

    @property
    def runtime_image(self) -> str:
        return self.images["runtime-standin"]

    def settings(self, **extra: Any) -> dict[str, Any]:
        """The namespace settings of a stack whose replicas run here: the stand-in vLLM image
        at the stand-ins' size, plus ``extra``."""
        return {"imageDigest": self.vllm_image, "resources": STANDIN_RESOURCES} | extra


def add_real_node(plane: LocalControlPlane) -> RealNode:
    """The control plane's real node, added now (skips where the machine cannot run one)."""
    require_real_node()
    plane.add_real_node(SPEC)
    return RealNode(SPEC.product, SPEC.gpus, plane.node_images)


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any


def get(
    admin: Cluster, namespace: str, key: str, *, path: str, port: int, token: str = ""
) -> Answer | None:
    """``GET path`` on the replica of ``key``, from this host through its Service's ClusterIP
    (None: nothing answered, e.g. no ready endpoint)."""
    service = admin.get(kinds.SERVICE, namespace, naming.object_name(key))
    assert service is not None, f"no Service for {key}"
    return http_get(service["spec"]["clusterIP"], port, path, token)


def http_get(address: str, port: int, path: str, token: str = "") -> Answer | None:
    """``GET path`` from this host (None: nothing answered; kube-proxy programs a Service's
    new endpoint about a second after its Pod turned ready)."""
    connection = http.client.HTTPConnection(address, port, timeout=HTTP_TIMEOUT_SECONDS)
    try:
        connection.request(
            "GET", path, headers={"Authorization": f"Bearer {token}"} if token else {}
        )
        response = connection.getresponse()
        raw = response.read()
    except OSError:
        return None
    finally:
        connection.close()
    try:
        return Answer(response.status, json.loads(raw) if raw else None)
    except ValueError:
        return Answer(response.status, raw.decode(errors="replace"))


def state_environment(kubeconfig: Path, state_dir: Path) -> automation.PulumiEnvironment:
    """A file-state Pulumi environment in ``state_dir`` (made here) for stacks that reach their
    cluster through ``kubeconfig``: a control plane of the scenario's own beside the suite's,
    or a namespace's provider identity."""
    state_dir.mkdir()
    return automation.PulumiEnvironment(
        state_dir=state_dir,
        pulumi_home=ROOT / ".infercrane" / "pulumi-home",
        passphrase="conformance-only",
        bin_dir=require_toolchain(ENGINE_BINARIES),
        kubeconfig=kubeconfig,
    )


def wait_ready(
    observe: Callable[[], ReplicaObservation], *, timeout: float, what: str
) -> ReplicaObservation:
    """The replica's observation once ``ready``; failing, the last one seen (why it is not
    ready: unschedulable, crash looping, ...) is what the reader needs."""
    seen: list[ReplicaObservation] = []

    def ready() -> ReplicaObservation | None:
        seen[:] = [observe()]
        return seen[0] if seen[0].state == "ready" else None

    try:
        return wait_for(ready, timeout=timeout, what=what)
    except AssertionError as late:
        raise AssertionError(f"{late}; last observed: {seen}") from None
