"""A disposable Kubernetes control plane (etcd + kube-apiserver + kube-controller-manager).

It exists so the project's tests and local runs get a real apiserver with real
RBAC, garbage collection and workload controllers, without Docker or a node.
By default there is no scheduler and no kubelet, so Pods stay Pending by design.
With ``scheduling=True`` it also runs kube-scheduler and kwok, and simulated GPU
node pools (:mod:`.nodepools`) make Pods schedule, run and turn Ready.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self, TypeVar

from . import health, kwok, realnode
from .binaries import find_binary
from .certs import (
    CONTROLLER_MANAGER_USER,
    KWOK_USER,
    SCHEDULER_USER,
    SERVICE_CLUSTER_IP_RANGE,
    ClusterPki,
    KeyPair,
    generate_cluster_pki,
    load_ca,
)
from .kubeconfig import (
    ADMIN_CONTEXT,
    CLUSTER_NAME,
    PROVIDER_CONTEXT,
    build_kubeconfig,
    write_kubeconfig,
)
from .nodepools import DEFAULT_PRODUCT_LABEL, NodePool, PoolNode, validate_label_name
from .ports import LOOPBACK, free_ports
from .processes import ManagedProcess, release, start_process, wait_until_ready
from .realnode import ClusterAccess, NodeLayout, RealNode, RealNodeUnavailable
from .realnodes import RealNodeSpec
from .state import ClusterState, teardown

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
WORKDIR_PREFIX = "infercrane-localcluster-"
# Pods requesting an extended resource (nvidia.com/gpu) get a toleration for the taint of
# the same name, as on GKE; simulated GPU nodes carry that taint.  Harmless without nodes.
ADMISSION_PLUGINS = ("ExtendedResourceToleration",)

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

    @classmethod
    def discover(cls, *, scheduling: bool = False) -> ControlPlaneBinaries:
        """Locate them via :func:`.binaries.find_binary` (raises if one is missing)."""
        return cls(
            etcd=find_binary("etcd"),
            kube_apiserver=find_binary("kube-apiserver"),
            kube_controller_manager=find_binary("kube-controller-manager"),
            kube_scheduler=find_binary("kube-scheduler") if scheduling else None,
            kwok=find_binary("kwok") if scheduling else None,
        )


@dataclass(frozen=True)
class _Layout:
    """Where each file of one cluster lives inside its workdir."""

    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def controller_manager_kubeconfig(self) -> Path:
        return self.root / "kube-controller-manager.kubeconfig"

    @property
    def scheduler_kubeconfig(self) -> Path:
        return self.root / "kube-scheduler.kubeconfig"

    @property
    def kwok_kubeconfig(self) -> Path:
        return self.root / "kwok.kubeconfig"

    @property
    def kwok_home(self) -> Path:
        return self.root / "kwok-home"

    def pem(self, name: str) -> Path:
        return self.pki / name


def _write_private(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return path


def _write_pair(layout: _Layout, stem: str, pair: KeyPair) -> tuple[Path, Path]:
    cert = layout.pem(f"{stem}.crt")
    cert.write_bytes(pair.cert_pem)
    return cert, _write_private(layout.pem(f"{stem}.key"), pair.key_pem)


class LocalControlPlane:
    """Start with :meth:`start` (or ``with LocalControlPlane() as cp:``), stop with :meth:`stop`.

    Contexts in :attr:`kubeconfig_path`: :attr:`admin_context` (``system:masters``)
    and :attr:`provider_context` (no rights until the project's Role is bound).

    ``scheduling=True`` adds kube-scheduler and kwok; ``node_pools`` (which imply
    scheduling) are created, and waited for until schedulable, at the end of :meth:`start`.
    ``real_node`` (implies scheduling) makes this machine a node whose Pods really run
    (:mod:`.realnode`); :meth:`start` refuses it before starting anything when the machine
    cannot run one (:class:`.realnode.RealNodeUnavailable`).
    ``gpu_product_label`` is the Node label carrying the GPU product.
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
    ) -> None:
        self._binaries = binaries
        self._base_dir = base_dir
        self._startup_timeout = startup_timeout
        self._stop_grace = stop_grace
        self._scheduling = scheduling or bool(node_pools) or real_node is not None
        self._node_pools = tuple(node_pools)
        self._real_node_spec = real_node
        self._real_node: RealNode | None = None
        self._gpu_product_label = validate_label_name(gpu_product_label)
        self._workdir: Path | None = None
        self._layout: _Layout | None = None
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

    @staticmethod
    def _require(value: _T | None, what: str) -> _T:
        if value is None:
            raise ControlPlaneError(f"{what} is only available after start()")
        return value

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
        binaries = self._binaries or ControlPlaneBinaries.discover(scheduling=self._scheduling)
        if self._scheduling and (binaries.kube_scheduler is None or binaries.kwok is None):
            raise ControlPlaneError("scheduling needs the kube_scheduler and kwok binaries")
        if self._scheduling:
            # A broken Stage file would only show up as Pods that never run; fail now.
            kwok.load_stages()
        if self._real_node_spec is not None:
            problem = realnode.unavailable()
            if problem is not None:
                raise RealNodeUnavailable(problem)
        if self._base_dir is not None:
            self._base_dir.mkdir(parents=True, exist_ok=True)
        self._workdir = Path(tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=self._base_dir))
        self._layout = _Layout(self._workdir)
        # Daemons live in their own sessions, so nothing kills them when this
        # interpreter exits; a caller that forgets stop() must not leak them.
        atexit.register(self._stop_at_exit)
        try:
            self._start_all(binaries, self._layout)
            for pool in self._node_pools:
                self.add_node_pool(pool, wait_ready=self._startup_timeout)
            if self._real_node_spec is not None:
                self.add_real_node(self._real_node_spec)
        except BaseException as exc:
            try:
                self.stop()
            except ControlPlaneError as rollback_error:
                exc.add_note(f"rollback after the failed start also failed: {rollback_error}")
            raise
        self._cold_start_seconds = time.monotonic() - began
        return self

    def _start_all(self, binaries: ControlPlaneBinaries, layout: _Layout) -> None:
        layout.pki.mkdir(mode=0o700)
        layout.logs.mkdir()
        pki = generate_cluster_pki()
        etcd_client, etcd_peer, apiserver_port, kcm_port, scheduler_port, kwok_port = free_ports(6)
        self._server = f"https://{LOOPBACK}:{apiserver_port}"
        files = self._write_pki(layout, pki)

        self._write_kubeconfigs(layout, pki)

        etcd = self._spawn(
            "etcd",
            [str(binaries.etcd), *_etcd_args(layout.etcd_data, etcd_client, etcd_peer)],
        )
        wait_until_ready(
            etcd,
            functools.partial(health.etcd_healthy, etcd_client),
            timeout=self._startup_timeout,
        )

        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(binaries.kube_apiserver),
                *_apiserver_args(files, etcd_client, apiserver_port),
            ],
        )
        admin_tls = health.client_tls_context(
            files["ca.crt"], files["admin.crt"], files["admin.key"]
        )
        # /readyz (not /healthz) waits for post-start hooks such as RBAC bootstrap
        # roles, without which the controller manager would be denied.
        wait_until_ready(
            apiserver,
            functools.partial(health.endpoint_ok, apiserver_port, "/readyz", admin_tls),
            timeout=self._startup_timeout,
        )

        ca_tls = health.client_tls_context(files["ca.crt"])
        kcm = self._spawn(
            "kube-controller-manager",
            [
                str(binaries.kube_controller_manager),
                *_controller_manager_args(layout, files, kcm_port),
            ],
        )
        daemons: list[tuple[ManagedProcess, Callable[[], bool]]] = [
            (kcm, functools.partial(health.endpoint_ok, kcm_port, "/healthz", ca_tls))
        ]
        if self._scheduling:
            # Scheduler and kwok only need the apiserver; starting them before waiting for
            # the controller manager overlaps their start-ups.
            daemons += self._spawn_scheduling(binaries, layout, files, scheduler_port, kwok_port)
        for daemon, probe in daemons:
            wait_until_ready(daemon, probe, timeout=self._startup_timeout)

    def _spawn_scheduling(
        self,
        binaries: ControlPlaneBinaries,
        layout: _Layout,
        files: dict[str, Path],
        scheduler_port: int,
        kwok_port: int,
    ) -> list[tuple[ManagedProcess, Callable[[], bool]]]:
        """Start kube-scheduler and kwok; return each with its readiness probe."""
        assert binaries.kube_scheduler is not None and binaries.kwok is not None
        ca_tls = health.client_tls_context(files["ca.crt"])
        scheduler = self._spawn(
            "kube-scheduler",
            [str(binaries.kube_scheduler), *_scheduler_args(layout, files, scheduler_port)],
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

    @staticmethod
    def _write_pki(layout: _Layout, pki: ClusterPki) -> dict[str, Path]:
        files: dict[str, Path] = {}
        files["ca.crt"] = layout.pem("ca.crt")
        files["ca.crt"].write_bytes(pki.ca.cert_pem)
        # The CA key lets the controller manager's CSR signer issue certificates.
        files["ca.key"] = _write_private(layout.pem("ca.key"), pki.ca.key_pem)
        for stem, pair in (
            ("apiserver", pki.apiserver_serving),
            ("kube-controller-manager-serving", pki.controller_manager_serving),
            ("kube-scheduler-serving", pki.scheduler_serving),
            ("admin", pki.admin),
            ("provider", pki.provider),
            ("kube-controller-manager", pki.controller_manager),
            ("apiserver-kubelet-client", pki.apiserver_kubelet_client),
        ):
            files[f"{stem}.crt"], files[f"{stem}.key"] = _write_pair(layout, stem, pair)
        files["sa.key"] = _write_private(layout.pem("sa.key"), pki.service_account.private_pem)
        files["sa.pub"] = layout.pem("sa.pub")
        files["sa.pub"].write_bytes(pki.service_account.public_pem)
        return files

    def _write_kubeconfigs(self, layout: _Layout, pki: ClusterPki) -> None:
        assert self._server is not None
        write_kubeconfig(
            layout.kubeconfig,
            build_kubeconfig(
                self._server,
                pki.ca.cert_pem,
                {ADMIN_CONTEXT: pki.admin, PROVIDER_CONTEXT: pki.provider},
            ),
        )
        # The daemons get no --context flag, so each file needs a current-context.
        daemon_users = [
            (layout.controller_manager_kubeconfig, CONTROLLER_MANAGER_USER, pki.controller_manager)
        ]
        if self._scheduling:
            daemon_users += [
                (layout.scheduler_kubeconfig, SCHEDULER_USER, pki.scheduler),
                (layout.kwok_kubeconfig, KWOK_USER, pki.kwok),
            ]
        for path, user, pair in daemon_users:
            write_kubeconfig(
                path,
                build_kubeconfig(self._server, pki.ca.cert_pem, {user: pair}, current_context=user),
            )

    def stop(self) -> None:
        """Stop every owned process (newest first) and delete the workdir. Idempotent.

        Does nothing after :meth:`detach`, which hands ownership to the caller.
        """
        if self._detached:
            return
        atexit.unregister(self._stop_at_exit)
        processes, self._processes = self._processes, []
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

    # -- convenience for callers -----------------------------------------------

    def api_client(self, context: str) -> ApiClient:
        """A ``kubernetes`` client authenticated as ``context``'s user."""
        return new_api_client(self.kubeconfig_path, context)

    def install_crd(
        self, path: Path, *, timeout: float = 60.0, labels: Mapping[str, str] | None = None
    ) -> list[str]:
        """Apply the CRD(s) in ``path`` as admin, with ``labels``, and wait until Established."""
        from .crds import install_crd

        with self.api_client(self.admin_context) as client:
            return install_crd(client, path, timeout=timeout, labels=labels)

    def add_node_pool(
        self,
        pool: NodePool,
        *,
        wait_ready: float | None = 60.0,
        labels: Mapping[str, str] | None = None,
    ) -> list[str]:
        """As admin, create ``pool``'s simulated Nodes; see :func:`.nodes.add_node_pool`."""
        if not self._scheduling:
            raise ControlPlaneError("node pools need a control plane started with scheduling=True")
        from .nodes import add_node_pool

        with self.api_client(self.admin_context) as client:
            return add_node_pool(
                client,
                pool,
                product_label=self._gpu_product_label,
                wait_ready=wait_ready,
                labels=labels,
            )

    def add_real_node(self, spec: RealNodeSpec) -> str:
        """Make this machine a node (see :mod:`.realnode`); return its name once it is usable.

        Raises :class:`.realnode.RealNodeUnavailable` (nothing started) when the machine
        cannot run one; a failure midway rolls the node back and leaves the host as before.
        """
        if not self._scheduling:
            raise ControlPlaneError(
                "a real node needs a control plane started with scheduling=True"
            )
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
            NodeLayout(layout.root / "node"),
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

    @property
    def real_node(self) -> str | None:
        """The real node's name, when this control plane has one."""
        return None if self._real_node is None else self._real_node.name

    @property
    def node_images(self) -> dict[str, str]:
        """The real node's images: catalog name -> digest-pinned reference (none without one)."""
        return {} if self._real_node is None else dict(self._real_node.runtime.images)

    def delete_node(self, name: str, *, wait_gone: float | None = 30.0) -> None:
        """As admin, delete one simulated Node; see :func:`.nodes.delete_node`."""
        from .nodes import delete_node

        with self.api_client(self.admin_context) as client:
            delete_node(client, name, wait_gone=wait_gone)

    def pool_nodes(self, product: str) -> list[PoolNode]:
        """As admin, the simulated Nodes of GPU ``product``, sorted by name."""
        from .nodes import list_pool_nodes

        with self.api_client(self.admin_context) as client:
            return list_pool_nodes(client, product, product_label=self._gpu_product_label)


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


def _etcd_args(data_dir: Path, client_port: int, peer_port: int) -> list[str]:
    client_url = f"http://{LOOPBACK}:{client_port}"
    peer_url = f"http://{LOOPBACK}:{peer_port}"
    return [
        "--name=infercrane",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=infercrane={peer_url}",
        "--initial-cluster-state=new",
        # A throwaway cluster gains nothing from fsync and start-up is much faster without it.
        "--unsafe-no-fsync=true",
    ]


def _apiserver_args(files: dict[str, Path], etcd_client_port: int, secure_port: int) -> list[str]:
    return [
        f"--etcd-servers=http://{LOOPBACK}:{etcd_client_port}",
        f"--bind-address={LOOPBACK}",
        f"--advertise-address={LOOPBACK}",
        f"--secure-port={secure_port}",
        f"--tls-cert-file={files['apiserver.crt']}",
        f"--tls-private-key-file={files['apiserver.key']}",
        f"--client-ca-file={files['ca.crt']}",
        "--authorization-mode=RBAC",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={files['sa.pub']}",
        f"--service-account-signing-key-file={files['sa.key']}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
        # Endpoint validation rejects the loopback advertise address, so the default
        # lease reconciler would fail forever writing the kubernetes Service endpoints.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        # Only a real node runs a kubelet; it is reached at its InternalIP (an address of this
        # machine), never by a hostname that would need DNS.
        "--kubelet-preferred-address-types=InternalIP",
        f"--kubelet-client-certificate={files['apiserver-kubelet-client.crt']}",
        f"--kubelet-client-key={files['apiserver-kubelet-client.key']}",
    ]


def _controller_manager_args(
    layout: _Layout, files: dict[str, Path], secure_port: int
) -> list[str]:
    kubeconfig = layout.controller_manager_kubeconfig
    return [
        # No --authentication/--authorization-kubeconfig: delegated auth would look
        # for a front-proxy CA this apiserver does not have and log errors forever,
        # and only /healthz (always allowed anonymously) is ever queried here.
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        # Every controller then acts as the controller manager's own user, which
        # is why that user is in system:masters (see certs.CONTROLLER_MANAGER_GROUPS).
        "--use-service-account-credentials=false",
        "--controllers=*",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={secure_port}",
        f"--tls-cert-file={files['kube-controller-manager-serving.crt']}",
        f"--tls-private-key-file={files['kube-controller-manager-serving.key']}",
        f"--service-account-private-key-file={files['sa.key']}",
        f"--root-ca-file={files['ca.crt']}",
        f"--cluster-signing-cert-file={files['ca.crt']}",
        f"--cluster-signing-key-file={files['ca.key']}",
        f"--cluster-name={CLUSTER_NAME}",
    ]


def _scheduler_args(layout: _Layout, files: dict[str, Path], secure_port: int) -> list[str]:
    return [
        # As for the controller manager: no delegated-auth kubeconfigs, only /readyz is
        # queried and it is always allowed anonymously.
        f"--kubeconfig={layout.scheduler_kubeconfig}",
        "--leader-elect=false",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={secure_port}",
        f"--tls-cert-file={files['kube-scheduler-serving.crt']}",
        f"--tls-private-key-file={files['kube-scheduler-serving.key']}",
    ]
