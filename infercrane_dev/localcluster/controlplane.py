"""The lifecycle of a disposable Kubernetes control plane (etcd + kube-apiserver +
kube-controller-manager): start its components in order, roll back on failure, stop.

It exists so the project's tests and local runs get a real apiserver with real
RBAC, garbage collection and workload controllers, without Docker or a node.
By default there is no scheduler and no kubelet, so Pods stay Pending by design.
With ``scheduling=True`` it also runs kube-scheduler and kwok, and simulated GPU
node pools (:mod:`.nodepools`) make Pods schedule, run and turn Ready; a real
node (:mod:`.realnode`) makes this machine a node whose Pods really run.

Each component's command line is its own module (:mod:`.etcd`, :mod:`.apiserver`,
:mod:`.controllermanager`, :mod:`.scheduler`, :mod:`.kwok`), the credentials are
written by :mod:`.credentials` where :mod:`.layout` says, and what callers do on the
running cluster is :class:`.admin.ClusterAdmin`; this module only decides when each
one starts and stops.

Every process listens on 127.0.0.1 only, every file lives in one temporary
directory, and :meth:`LocalControlPlane.stop` (also run when a start step
fails) must leave no process and no directory behind.  This module must not
install anything, must not touch a kubeconfig outside its workdir, and must
never act as the provider identity on anyone's behalf.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from infercrane_dev.toolchain import find_binary

from . import health, kserve, kwok
from .admin import ClusterAdmin
from .apiserver import apiserver_args
from .certs import (
    ADMIN_GROUPS,
    generate_cluster_pki,
    issue_client_cert,
    issue_serving_cert,
    load_ca,
)
from .controllermanager import controller_manager_args
from .credentials import write_kubeconfigs, write_pki, write_private
from .etcd import etcd_args
from .hostchecks import RealNodeUnavailable, unavailable
from .kubeconfig import ADMIN_CONTEXT, CLUSTER_NAME, PROVIDER_CONTEXT, write_daemon_kubeconfig
from .layout import ClusterLayout
from .nodepools import DEFAULT_PRODUCT_LABEL, NodePool, validate_label_name
from .ports import LOOPBACK, free_ports
from .processes import ManagedProcess, release, start_process, stop_process, wait_until_ready
from .realnode import ClusterAccess, RealNode
from .realnodes import RealNodeSpec
from .scheduler import scheduler_args
from .state import ClusterState, teardown

WORKDIR_PREFIX = "infercrane-localcluster-"

_T = TypeVar("_T")


class ControlPlaneError(RuntimeError):
    """Starting or stopping the local control plane failed."""


@dataclass(frozen=True)
class ControlPlaneBinaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    # Needed only with scheduling.
    kube_scheduler: Path | None = None
    kwok: Path | None = None
    # Needed only with KServe.
    kserve_manager: Path | None = None

    @classmethod
    def discover(cls, *, scheduling: bool = False, kserve: bool = False) -> ControlPlaneBinaries:
        """Locate them via :func:`.binaries.find_binary` (raises if one is missing)."""
        return cls(
            etcd=find_binary("etcd"),
            kube_apiserver=find_binary("kube-apiserver"),
            kube_controller_manager=find_binary("kube-controller-manager"),
            kube_scheduler=find_binary("kube-scheduler") if scheduling else None,
            kwok=find_binary("kwok") if scheduling else None,
            kserve_manager=find_binary("kserve-manager") if kserve else None,
        )


class LocalControlPlane(ClusterAdmin):
    """Start with :meth:`start` (or ``with LocalControlPlane() as cp:``), stop with :meth:`stop`.

    Contexts in :attr:`kubeconfig_path`: :attr:`admin_context` (``system:masters``)
    and :attr:`provider_context` (no rights until the project's Role is bound).

    ``scheduling=True`` adds kube-scheduler and kwok; ``node_pools`` (which imply
    scheduling) are created, and waited for until schedulable, at the end of :meth:`start`.
    ``real_node`` (implies scheduling) makes this machine a node whose Pods really run
    (:mod:`.realnode`); :meth:`start` refuses it before starting anything when the machine
    cannot run one (:class:`.hostchecks.RealNodeUnavailable`).
    ``gpu_product_label`` is the Node label carrying the GPU product.
    ``kserve=True`` installs KServe and runs its controller (:mod:`.kserve`);
    :meth:`stop_kserve` and :meth:`start_kserve` stop and restart the controller alone.
    """

    def __init__(
        self,
        *,
        binaries: ControlPlaneBinaries | None = None,
        base_dir: Path | None = None,
        startup_timeout: float = 120.0,
        stop_grace: float = 15.0,
        scheduling: bool = False,
        node_pools: Sequence[NodePool] = (),
        gpu_product_label: str = DEFAULT_PRODUCT_LABEL,
        real_node: RealNodeSpec | None = None,
        kserve: bool = False,
    ) -> None:
        self._binaries = binaries
        self._base_dir = base_dir
        self._startup_timeout = startup_timeout
        self._stop_grace = stop_grace
        self._scheduling = scheduling or bool(node_pools) or real_node is not None
        self._node_pools = tuple(node_pools)
        self._real_node_spec = real_node
        self._real_node: RealNode | None = None
        self._kserve = kserve
        self._kserve_manager: ManagedProcess | None = None
        self._kserve_ports: tuple[int, int] | None = None  # webhook, health
        self._gpu_product_label = validate_label_name(gpu_product_label)
        self._workdir: Path | None = None
        self._layout: ClusterLayout | None = None
        self._processes: list[ManagedProcess] = []
        self._server: str | None = None
        self._cold_start_seconds: float | None = None
        self._detached = False

    # -- public read-only view -------------------------------------------------

    @property
    def workdir(self) -> Path:
        return self._require(self._workdir, "workdir")

    @property
    def kubeconfig_path(self) -> Path:
        return self._require(self._layout, "kubeconfig_path").kubeconfig

    @property
    def server(self) -> str:
        return self._require(self._server, "server")

    @property
    def admin_context(self) -> str:
        return ADMIN_CONTEXT

    @property
    def provider_context(self) -> str:
        return PROVIDER_CONTEXT

    @property
    def cluster_name(self) -> str:
        return CLUSTER_NAME

    @property
    def cold_start_seconds(self) -> float:
        """Wall time of :meth:`start`, from PKI generation to a healthy controller manager."""
        return self._require(self._cold_start_seconds, "cold_start_seconds")

    @property
    def processes(self) -> tuple[ManagedProcess, ...]:
        """Daemons currently owned, in start order."""
        return tuple(self._processes)

    @property
    def running(self) -> bool:
        return self._cold_start_seconds is not None and not self._detached

    @property
    def scheduling(self) -> bool:
        """True when kube-scheduler and kwok run (Pods can land on simulated nodes)."""
        return self._scheduling

    @property
    def gpu_product_label(self) -> str:
        return self._gpu_product_label

    @property
    def real_node(self) -> str | None:
        """The real node's name, when this control plane has one."""
        return None if self._real_node is None else self._real_node.name

    @property
    def node_images(self) -> dict[str, str]:
        """The real node's images: catalog name -> digest-pinned reference (none without one)."""
        return {} if self._real_node is None else dict(self._real_node.runtime.images)

    @staticmethod
    def _require(value: _T | None, what: str) -> _T:
        if value is None:
            raise ControlPlaneError(f"{what} is only available after start()")
        return value

    def _require_scheduling(self, refusal: str) -> None:
        if not self._scheduling:
            raise ControlPlaneError(refusal)

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> Self:
        """Bring up etcd, kube-apiserver, kube-controller-manager in order.

        On any failure everything already started is stopped and the workdir
        removed before the exception propagates.
        """
        if self._workdir is not None:
            raise ControlPlaneError("this LocalControlPlane was already started")
        began = time.monotonic()
        # Resolve binaries before creating anything, so a missing one costs nothing.
        binaries = self._binaries or ControlPlaneBinaries.discover(
            scheduling=self._scheduling, kserve=self._kserve
        )
        if self._kserve and binaries.kserve_manager is None:
            raise ControlPlaneError("KServe needs the kserve_manager binary")
        self._binaries = binaries
        if self._scheduling and (binaries.kube_scheduler is None or binaries.kwok is None):
            raise ControlPlaneError("scheduling needs the kube_scheduler and kwok binaries")
        if self._scheduling:
            # A broken Stage file would only show up as Pods that never run; fail now.
            kwok.load_stages()
        if self._real_node_spec is not None:
            problem = unavailable()
            if problem is not None:
                raise RealNodeUnavailable(problem)
        if self._base_dir is not None:
            self._base_dir.mkdir(parents=True, exist_ok=True)
        self._workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=self._base_dir))
        self._layout = ClusterLayout(self._workdir)
        # Daemons live in their own sessions, so nothing kills them when this
        # interpreter exits; a caller that forgets stop() must not leak them.
        atexit.register(self._stop_at_exit)
        try:
            self._start_all(binaries, self._layout)
            for pool in self._node_pools:
                self.add_node_pool(pool, wait_ready=self._startup_timeout)
            if self._real_node_spec is not None:
                self.add_real_node(self._real_node_spec)
            if self._kserve:
                self._install_kserve(binaries, self._layout)
                self.start_kserve()
        except BaseException as exc:
            try:
                self.stop()
            except ControlPlaneError as rollback_error:
                exc.add_note(f"rollback after the failed start also failed: {rollback_error}")
            raise
        self._cold_start_seconds = time.monotonic() - began
        return self

    def _start_all(self, binaries: ControlPlaneBinaries, layout: ClusterLayout) -> None:
        layout.logs.mkdir()
        pki = generate_cluster_pki()
        etcd_client, etcd_peer, apiserver_port, kcm_port, scheduler_port, kwok_port = free_ports(6)
        self._server = f"https://{LOOPBACK}:{apiserver_port}"
        write_pki(layout, pki)
        write_kubeconfigs(layout, pki, self._server, scheduling=self._scheduling)

        etcd = self._spawn(
            "etcd",
            [str(binaries.etcd), *etcd_args(layout.etcd_data, etcd_client, etcd_peer)],
        )
        wait_until_ready(
            etcd,
            functools.partial(health.etcd_healthy, etcd_client),
            timeout=self._startup_timeout,
        )

        apiserver = self._spawn(
            "kube-apiserver",
            [str(binaries.kube_apiserver), *apiserver_args(layout, etcd_client, apiserver_port)],
        )
        admin_tls = health.client_tls_context(
            layout.pem("ca.crt"), layout.pem("admin.crt"), layout.pem("admin.key")
        )
        # /readyz (not /healthz) waits for post-start hooks such as RBAC bootstrap
        # roles, without which the controller manager would be denied.
        wait_until_ready(
            apiserver,
            functools.partial(health.endpoint_ok, apiserver_port, "/readyz", admin_tls),
            timeout=self._startup_timeout,
        )

        ca_tls = health.client_tls_context(layout.pem("ca.crt"))
        kcm = self._spawn(
            "kube-controller-manager",
            [str(binaries.kube_controller_manager), *controller_manager_args(layout, kcm_port)],
        )
        daemons: list[tuple[ManagedProcess, Callable[[], bool]]] = [
            (kcm, functools.partial(health.endpoint_ok, kcm_port, "/healthz", ca_tls))
        ]
        if self._scheduling:
            # Scheduler and kwok only need the apiserver; starting them before waiting for
            # the controller manager overlaps their start-ups.
            daemons += self._spawn_scheduling(binaries, layout, scheduler_port, kwok_port)
        for daemon, probe in daemons:
            wait_until_ready(daemon, probe, timeout=self._startup_timeout)

    def _spawn_scheduling(
        self,
        binaries: ControlPlaneBinaries,
        layout: ClusterLayout,
        scheduler_port: int,
        kwok_port: int,
    ) -> list[tuple[ManagedProcess, Callable[[], bool]]]:
        """Start kube-scheduler and kwok; return each with its readiness probe."""
        assert binaries.kube_scheduler is not None and binaries.kwok is not None
        ca_tls = health.client_tls_context(layout.pem("ca.crt"))
        scheduler = self._spawn(
            "kube-scheduler",
            [str(binaries.kube_scheduler), *scheduler_args(layout, scheduler_port)],
        )
        layout.kwok_home.mkdir()
        kwok_daemon = self._spawn(
            "kwok",
            [str(binaries.kwok), *kwok.kwok_args(layout.kwok_kubeconfig, kwok_port)],
            # kwok merges ~/.kwok/kwok.yaml into its config if it exists: not the user's.
            env={**os.environ, "HOME": str(layout.kwok_home)},
        )
        return [
            # /readyz also waits for the scheduler's informers to sync.
            (scheduler, functools.partial(health.endpoint_ok, scheduler_port, "/readyz", ca_tls)),
            # kwok serves /healthz only once its controllers run.
            (kwok_daemon, functools.partial(health.plain_endpoint_ok, kwok_port, "/healthz")),
        ]

    def _spawn(
        self, name: str, argv: list[str], env: dict[str, str] | None = None
    ) -> ManagedProcess:
        assert self._layout is not None
        process = start_process(
            name, argv, self._layout.logs / f"{name}.log", cwd=self._layout.root, env=env
        )
        # Recorded before readiness is awaited so a failed wait still stops it.
        self._processes.append(process)
        return process

    def stop(self) -> None:
        """Stop every owned process (newest first) and delete the workdir. Idempotent.

        Does nothing after :meth:`detach`, which hands ownership to the caller.
        """
        if self._detached:
            return
        atexit.unregister(self._stop_at_exit)
        processes, self._processes = self._processes, []
        self._kserve_manager = None
        workdir = self._workdir
        node, self._real_node = self._real_node, None
        errors = [] if node is None else node.runtime.teardown(grace=self._stop_grace)
        errors += teardown(processes, workdir, grace=self._stop_grace, keep_workdir=bool(errors))
        self._cold_start_seconds = None
        if errors:
            raise ControlPlaneError("stopping the local control plane: " + "; ".join(errors))

    def detach(self) -> ClusterState:
        """Give up ownership: the daemons keep running after this object is gone.

        The returned record is what :func:`.state.stop_recorded` needs later.
        """
        state = ClusterState(
            workdir=self.workdir,
            kubeconfig_path=self.kubeconfig_path,
            server=self.server,
            admin_context=self.admin_context,
            provider_context=self.provider_context,
            cold_start_seconds=self.cold_start_seconds,
            processes=[release(p) for p in self._processes],
            scheduling=self._scheduling,
            gpu_product_label=self._gpu_product_label,
            real_node=None if self._real_node is None else self._real_node.runtime.to_json(),
        )
        if self._real_node is not None:
            self._real_node.detach()
        self._detached = True
        atexit.unregister(self._stop_at_exit)
        return state

    def _stop_at_exit(self) -> None:
        with contextlib.suppress(ControlPlaneError):
            self.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- KServe ----------------------------------------------------------------

    def _install_kserve(self, binaries: ControlPlaneBinaries, layout: ClusterLayout) -> None:
        """KServe's CRDs, namespace, ConfigMap and webhook configurations, the manager's
        credentials and serving certificate; its webhook and health ports."""
        assert binaries.kserve_manager is not None
        ca = load_ca(layout.pem("ca.crt").read_bytes(), layout.pem("ca.key").read_bytes())
        write_daemon_kubeconfig(
            layout.kserve_kubeconfig,
            self.server,
            ca.cert_pem,
            kserve.MANAGER_USER,
            issue_client_cert(ca, kserve.MANAGER_USER, ADMIN_GROUPS),
        )
        certificates = kserve.serving_cert_dir(layout.kserve_tmp)
        certificates.mkdir(parents=True, mode=0o700)
        serving = issue_serving_cert(ca, "kserve-webhook-server", (), (LOOPBACK,))
        (certificates / "tls.crt").write_bytes(serving.cert_pem)
        write_private(certificates / "tls.key", serving.key_pem)
        webhook_port, health_port = free_ports(2)
        self._kserve_ports = (webhook_port, health_port)
        with self.api_client(ADMIN_CONTEXT) as api:
            kserve.install(
                api,
                kserve.KServeFiles.beside(binaries.kserve_manager),
                webhook_url=f"https://{LOOPBACK}:{webhook_port}",
                ca_pem=ca.cert_pem,
                timeout=self._startup_timeout,
            )

    def start_kserve(self) -> None:
        """Start the KServe controller (installed by :meth:`start` with ``kserve=True``) and
        wait until its webhooks serve."""
        if not self._kserve:
            raise ControlPlaneError("KServe needs a control plane started with kserve=True")
        if self._kserve_manager is not None:
            return
        layout = self._require(self._layout, "start_kserve")
        binaries = self._require(self._binaries, "start_kserve")
        assert binaries.kserve_manager is not None
        webhook_port, health_port = self._require(self._kserve_ports, "start_kserve")
        manager = self._spawn(
            "kserve-manager",
            [
                str(binaries.kserve_manager),
                *kserve.manager_args(layout.kserve_kubeconfig, webhook_port, health_port),
            ],
            env={**os.environ, **kserve.manager_env(layout.kserve_tmp)},
        )
        self._kserve_manager = manager
        # /readyz turns ready once the webhook server has started.
        wait_until_ready(
            manager,
            functools.partial(health.plain_endpoint_ok, health_port, "/readyz"),
            timeout=self._startup_timeout,
        )

    def stop_kserve(self) -> None:
        """Stop the KServe controller alone (its CRDs and webhooks stay). No-op if stopped."""
        manager, self._kserve_manager = self._kserve_manager, None
        if manager is None:
            return
        self._processes.remove(manager)
        stop_process(manager, grace=self._stop_grace)

    @property
    def kserve_running(self) -> bool:
        return self._kserve_manager is not None

    # -- the real node ---------------------------------------------------------

    def add_real_node(self, spec: RealNodeSpec) -> str:
        """Make this machine a node (see :mod:`.realnode`); return its name once it is usable.

        Raises :class:`.hostchecks.RealNodeUnavailable` (nothing started) when the machine
        cannot run one; a failure midway rolls the node back and leaves the host as before.
        """
        self._require_scheduling("a real node needs a control plane started with scheduling=True")
        if self._real_node is not None:
            raise ControlPlaneError(
                f"this control plane already has real node {self._real_node.name}"
            )
        layout = self._require(self._layout, "add_real_node")
        access = ClusterAccess(
            server=self.server,
            ca=load_ca(layout.pem("ca.crt").read_bytes(), layout.pem("ca.key").read_bytes()),
            ca_file=layout.pem("ca.crt"),
            admin_kubeconfig=layout.kubeconfig,
            admin_context=ADMIN_CONTEXT,
            logs=layout.logs,
        )
        node = RealNode(
            spec,
            access,
            layout.node,
            product_label=self._gpu_product_label,
            startup_timeout=self._startup_timeout,
            stop_grace=self._stop_grace,
        )
        node.start()
        self._real_node = node
        return node.name

    def remove_real_node(self) -> None:
        """Stop the real node (its Pods with it), put the host back, and delete its Node: the
        machine is free for another real node. No-op without one."""
        from kubernetes.client import CoreV1Api
        from kubernetes.client.exceptions import ApiException

        node, self._real_node = self._real_node, None
        if node is None:
            return
        errors = node.runtime.teardown(grace=self._stop_grace)
        if not errors:
            shutil.rmtree(node.runtime.layout.root, ignore_errors=True)
        with self.api_client(self.admin_context) as api:
            try:
                CoreV1Api(api).delete_node(node.name)
            except ApiException as error:
                if error.status != 404:
                    errors.append(f"delete Node {node.name}: HTTP {error.status}")
        if errors:
            raise ControlPlaneError("removing the real node: " + "; ".join(errors))
