"""Where the conformance suite runs, behind one interface.

``LocalBackend`` starts the local control plane (scheduling on, no node until a test adds a
pool) and may add and delete simulated GPU nodes. ``ExternalBackend`` uses an existing cluster
through a named admin context and never adds or deletes a node. All else is shared, so one
code path runs everywhere: the admin preflight before anything is created, a disposable
namespace per test bootstrapped from ``deploy/kubernetes``, the provider acting as that
namespace's ServiceAccount, and at the end removing what the run created and proving that
nothing of it is left.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from infercrane_dev.localcluster import LocalControlPlane, new_api_client
from infercrane_dev.localcluster.bootstrap import Bootstrapped
from infercrane_pulumi.config.intents import WorkloadApiName
from tests.conformance import preflight
from tests.conformance.gpus import ExistingGpuNodes, GpuSupply, Pools
from tests.conformance.harness import ENGINE_BINARIES, LOCAL_BINARIES, require_toolchain
from tests.conformance.identity import KubeconfigError, ProviderIdentity, cluster_entry, issue
from tests.conformance.kserve_api import KServeApi
from tests.conformance.ledger import RunLedger
from tests.conformance.target import ExternalTarget

NODES_REASON = "needs a cluster whose GPU nodes the suite may add and delete (local control plane)"
Printer = Callable[[str], None]


@dataclass(frozen=True)
class Tenant:
    """One test's namespace, bootstrapped as admin, and the provider identity acting in it."""

    bootstrapped: Bootstrapped
    provider: ProviderIdentity

    @property
    def namespace(self) -> str:
        return self.bootstrapped.namespace


class Backend(ABC):
    def __init__(
        self,
        admin: client.ApiClient,
        context: str,
        cluster: Mapping[str, Any],
        *,
        may_install_kserve: bool,
    ) -> None:
        self.admin = admin
        self.context = context
        # How the provider's kubeconfigs reach the API server: as the admin context does.
        self.cluster = cluster
        self.ledger = RunLedger(admin)
        self.kserve = KServeApi(admin, self.ledger, may_install=may_install_kserve)

    @property
    def description(self) -> str:
        return f"context {self.context} at {self.cluster.get('server', '?')}"

    def preflight(self) -> None:
        """Raise :class:`preflight.PreflightError` unless the admin may do all the suite does."""
        install = self.kserve.may_install and not self.kserve.served()
        preflight.require_admin(self.admin, self.context, install_kserve_crd=install)

    def tenant(
        self, workdir: Path, *, workload_api: WorkloadApiName = "deployment", observe: bool = False
    ) -> Tenant:
        # KServe never reconciles a predictor whose host label "<name>-predictor-<namespace>"
        # is over 63 characters: its namespaces get a shorter prefix (17 characters in all).
        namespace = self.ledger.namespace_name("k" if workload_api == "kserve" else "ic")
        bootstrapped = self.ledger.bootstrap(namespace, workload_api=workload_api, observe=observe)
        provider = issue(
            self.admin, self.cluster, bootstrapped.namespace, workdir / "provider.kubeconfig"
        )
        return Tenant(bootstrapped, provider)

    def finish(self, printer: Printer) -> None:
        """Remove what the run created; raise if anything of it is left."""
        started = time.monotonic()
        self.ledger.sweep()
        summary = self.ledger.verify_clean()
        printer(f"{summary} (removal took {time.monotonic() - started:.1f}s)")

    def local(self, why: str) -> LocalControlPlane:
        """The local control plane, or skip: ``why`` the test needs one."""
        pytest.skip(f"{why}; this cluster: {self.description}")

    @contextlib.contextmanager
    def pools(self) -> Iterator[Pools]:
        """Simulated GPU node pools for one test (local only), deleted after it."""
        made = Pools(self.local(NODES_REASON), self.ledger.labels)
        try:
            yield made
        finally:
            made.cleanup()

    @abstractmethod
    def gpu_supply(self) -> contextlib.AbstractContextManager[GpuSupply]:
        """Schedulable GPU nodes for one test."""


class LocalBackend(Backend):
    def __init__(self, plane: LocalControlPlane, admin: client.ApiClient) -> None:
        cluster = cluster_entry(str(plane.kubeconfig_path), plane.admin_context)
        super().__init__(admin, plane.admin_context, cluster, may_install_kserve=True)
        self.plane = plane

    @property
    def description(self) -> str:
        return f"the suite's local control plane at {self.plane.server}"

    def local(self, why: str) -> LocalControlPlane:
        return self.plane

    def gpu_supply(self) -> contextlib.AbstractContextManager[GpuSupply]:
        return self.pools()


class ExternalBackend(Backend):
    def __init__(
        self, target: ExternalTarget, admin: client.ApiClient, cluster: Mapping[str, Any]
    ) -> None:
        super().__init__(
            admin, target.context, cluster, may_install_kserve=target.install_kserve_crd
        )
        self.gpu_workload = target.gpu_workload
        self.gpu_resources = target.gpu_resources

    def gpu_supply(self) -> contextlib.AbstractContextManager[GpuSupply]:
        return contextlib.nullcontext(
            ExistingGpuNodes(self.admin, self.description, self.gpu_workload, self.gpu_resources)
        )


def connect(target: ExternalTarget) -> ExternalBackend:
    """The existing cluster, preflighted; every refusal is one line and nothing is created.

    Raises :class:`KubeconfigError` or :class:`preflight.PreflightError`.
    """
    cluster = cluster_entry(target.kubeconfig, target.context)
    try:
        admin = new_api_client(target.kubeconfig, target.context)
    except ConfigException as error:
        raise KubeconfigError(
            f"cannot load context {target.context!r} from {target.kubeconfig}: "
            f"{str(error).splitlines()[0]}"
        ) from None
    backend = ExternalBackend(target, admin, cluster)
    try:
        backend.preflight()
    except (urllib3.exceptions.HTTPError, OSError, ApiException) as error:
        admin.close()  # type: ignore[no-untyped-call]
        # The client's own text may carry URLs or credentials; the type is enough to act on.
        raise preflight.PreflightError(
            f"cannot ask the API server of context {target.context!r} "
            f"({type(error).__name__}); is the cluster up?"
        ) from None
    except preflight.PreflightError:
        admin.close()  # type: ignore[no-untyped-call]
        raise
    return backend


@contextlib.contextmanager
def open_backend(target: ExternalTarget | None, printer: Printer) -> Iterator[Backend]:
    """The session's backend; on exit the run's objects are removed and proven gone."""
    with contextlib.ExitStack() as stack:
        backend: Backend
        if target is None:
            require_toolchain(LOCAL_BINARIES)
            plane = LocalControlPlane(scheduling=True).start()
            stack.callback(plane.stop)
            printer(f"local control plane cold start: {plane.cold_start_seconds:.1f}s")
            admin = stack.enter_context(plane.api_client(plane.admin_context))
            backend = LocalBackend(plane, admin)
            backend.preflight()
        else:
            require_toolchain(ENGINE_BINARIES)
            backend = connect(target)
            stack.callback(backend.admin.close)
            printer(f"conformance against {backend.description}, run {backend.ledger.run_id}")
        try:
            yield backend
        finally:
            backend.finish(printer)
