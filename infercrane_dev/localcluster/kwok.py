"""How the local control plane runs kwok, the kubelet stand-in for simulated GPU nodes.

kwok v0.8.0 ships no default behaviour: without Stage objects it does nothing.  The Stages
we rely on live in ``kwok-stages.yaml`` next to this module (see its header for what each
one simulates), and this module only knows where that file is, how to check it, and the
command line that runs kwok against one cluster.  It starts nothing itself.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import yaml

from .certs import SERVICE_CLUSTER_IP_RANGE
from .nodepools import SIMULATED_LABEL, SIMULATED_VALUE
from .ports import LOOPBACK

STAGES_FILE = Path(__file__).with_name("kwok-stages.yaml")
STAGE_API_VERSION = "kwok.x-k8s.io/v1alpha1"

# Pod IPs of simulated Pods.  kwok's default (10.0.0.0/24) would overlap the Service range;
# this is what Kind and flannel use, and it is disjoint from SERVICE_CLUSTER_IP_RANGE.
POD_CIDR = "10.244.0.0/16"
# The InternalIP every simulated node reports.  Nothing is ever sent to it: it only has to
# be a plausible, non-loopback address outside both ranges above.
NODE_IP = "10.89.0.1"
# kwok renews a Lease per node, as a kubelet does; the node lifecycle controller takes a
# renewed Lease as the heartbeat, so status heartbeats can be rare.
NODE_LEASE_SECONDS = 40


class StageFileError(ValueError):
    """The Stage configuration is missing or malformed."""


def load_stages(path: Path = STAGES_FILE) -> list[dict[str, Any]]:
    """The Stage documents of ``path``, checked for the shape kwok needs."""
    try:
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    except (OSError, yaml.YAMLError) as error:
        raise StageFileError(f"cannot read kwok stages {path}: {error}") from error
    names: set[str] = set()
    for doc in documents:
        if not isinstance(doc, dict) or doc.get("kind") != "Stage":
            raise StageFileError(f"{path}: every document must be a Stage, got {doc!r:.80}")
        name = str((doc.get("metadata") or {}).get("name", ""))
        if doc.get("apiVersion") != STAGE_API_VERSION or not name or name in names:
            raise StageFileError(
                f"{path}: Stage {name!r} lacks {STAGE_API_VERSION} or a unique name"
            )
        spec = doc.get("spec") or {}
        if "resourceRef" not in spec or "selector" not in spec or "next" not in spec:
            raise StageFileError(f"{path}: Stage {name} needs resourceRef, selector and next")
        names.add(name)
    if not documents:
        raise StageFileError(f"{path}: no Stage documents")
    return documents


def networks_disjoint() -> bool:
    """Pod range, Service range and the node IP never overlap (asserted by the unit tests)."""
    pods = ipaddress.ip_network(POD_CIDR)
    services = ipaddress.ip_network(SERVICE_CLUSTER_IP_RANGE)
    node = ipaddress.ip_address(NODE_IP)
    return not pods.overlaps(services) and node not in pods and node not in services


def kwok_args(kubeconfig: Path, server_port: int, stages: Path = STAGES_FILE) -> list[str]:
    """kwok's flags: only labelled nodes are managed; health served on loopback."""
    return [
        f"--kubeconfig={kubeconfig}",
        # Explicit, so no ~/.kwok/kwok.yaml is merged in (HOME is the workdir too).
        f"--config={stages}",
        f"--manage-nodes-with-label-selector={SIMULATED_LABEL}={SIMULATED_VALUE}",
        f"--cidr={POD_CIDR}",
        f"--node-ip={NODE_IP}",
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        # Serves /healthz (our readiness probe) once the controllers run.
        f"--server-address={LOOPBACK}:{server_port}",
    ]
