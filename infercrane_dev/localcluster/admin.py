"""Talking to a running local cluster: a ``kubernetes`` client for one kubeconfig context, and
the admin conveniences :class:`.controlplane.LocalControlPlane` offers (CRDs, simulated nodes).

Kept apart from the lifecycle so that what runs beside the control plane (the real node, the
node subcommands of a second process) reaches the cluster without importing the lifecycle.
The conveniences act as admin only, never as the provider identity on anyone's behalf.  The
kubernetes client (and :mod:`.nodes`, which imports it) is imported where it is used: it is
slow to import, and ``up``/``down`` never need it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from . import crds
from .kubeconfig import ADMIN_CONTEXT
from .nodepools import NodePool, PoolNode

if TYPE_CHECKING:
    from kubernetes.client import ApiClient


def new_api_client(kubeconfig_path: Path | str, context: str) -> ApiClient:
    """A ``kubernetes`` client for one named context (e.g. of a cluster started by ``up``).

    ``kubeconfig_path`` may also be a KUBECONFIG-style list of files (``a:b``), as kubectl's.
    """
    from kubernetes import config

    # The kubernetes package ships py.typed but leaves this loader unannotated.
    api: ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(kubeconfig_path), context=context, persist_config=False
    )
    return api


class ClusterAdmin(ABC):
    """The admin's conveniences on one started cluster; the subclass says which cluster."""

    @property
    @abstractmethod
    def kubeconfig_path(self) -> Path: ...

    @property
    @abstractmethod
    def gpu_product_label(self) -> str: ...

    @abstractmethod
    def _require_scheduling(self, refusal: str) -> None:
        """Raise with ``refusal`` unless the cluster runs a scheduler and kwok."""

    def api_client(self, context: str) -> ApiClient:
        """A ``kubernetes`` client authenticated as ``context``'s user."""
        return new_api_client(self.kubeconfig_path, context)

    def install_crd(
        self, path: Path, *, timeout: float = 60.0, labels: Mapping[str, str] | None = None
    ) -> list[str]:
        """Apply the CRD(s) in ``path`` as admin, with ``labels``, and wait until Established."""
        with self.api_client(ADMIN_CONTEXT) as client:
            return crds.install_crd(client, path, timeout=timeout, labels=labels)

    def add_node_pool(
        self,
        pool: NodePool,
        *,
        wait_ready: float | None = 60.0,
        labels: Mapping[str, str] | None = None,
    ) -> list[str]:
        """As admin, create ``pool``'s simulated Nodes; see :func:`.nodes.add_node_pool`."""
        self._require_scheduling("node pools need a control plane started with scheduling=True")
        from .nodes import add_node_pool

        with self.api_client(ADMIN_CONTEXT) as client:
            return add_node_pool(
                client,
                pool,
                product_label=self.gpu_product_label,
                wait_ready=wait_ready,
                labels=labels,
            )

    def delete_node(self, name: str, *, wait_gone: float | None = 30.0) -> None:
        """As admin, delete one simulated Node; see :func:`.nodes.delete_node`."""
        from .nodes import delete_node

        with self.api_client(ADMIN_CONTEXT) as client:
            delete_node(client, name, wait_gone=wait_gone)

    def pool_nodes(self, product: str) -> list[PoolNode]:
        """As admin, the simulated Nodes of GPU ``product``, sorted by name."""
        from .nodes import list_pool_nodes

        with self.api_client(ADMIN_CONTEXT) as client:
            return list_pool_nodes(client, product, product_label=self.gpu_product_label)
