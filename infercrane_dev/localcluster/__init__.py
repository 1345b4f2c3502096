"""Disposable local Kubernetes control plane for tests and local runs.

etcd + kube-apiserver (RBAC) + kube-controller-manager on loopback, with a
kubeconfig holding an ``infercrane-admin`` and an ``infercrane-provider``
context.  By default no scheduler, no kubelet: Pods stay Pending by design.
``LocalControlPlane(scheduling=True)`` adds kube-scheduler and kwok, and
simulated GPU node pools (``NodePool``) on which Pods schedule, run and turn Ready.
Nothing in this package provisions real infrastructure.
"""

from __future__ import annotations

from .admin import new_api_client
from .controlplane import ControlPlaneBinaries, ControlPlaneError, LocalControlPlane
from .crds import CrdError, install_crd
from .kubeconfig import ADMIN_CONTEXT, CLUSTER_NAME, PROVIDER_CONTEXT
from .nodepools import NodePool, NodePoolError, PoolNode, parse_node_pool
from .ports import free_port, free_ports

__all__ = [
    "ADMIN_CONTEXT",
    "CLUSTER_NAME",
    "PROVIDER_CONTEXT",
    "ControlPlaneBinaries",
    "ControlPlaneError",
    "CrdError",
    "LocalControlPlane",
    "NodePool",
    "NodePoolError",
    "PoolNode",
    "free_port",
    "free_ports",
    "install_crd",
    "new_api_client",
    "parse_node_pool",
]
