"""A real node of the local control plane: this machine runs a kubelet whose Pods really run.

Start order (each step's readiness polled with a deadline while watching for early exit, and
everything rolled back if one fails): the machine lock's holder (:mod:`.hostlock`), a record
of the host (:mod:`.hoststate`), the bridge (:mod:`.hostnet`), containerd (then the image
stand-in images of :mod:`infercrane_dev.images`, built from the tools bin dir, are imported),
the kubelet (Ready in the API), the fake-GPU device plugin (the Node
allocates the GPUs), kube-proxy (healthy).  :meth:`RealNodeRuntime.teardown` stops them in
reverse, kills what containers are left, unmounts, removes the bridge and the ``KUBE-*``
chains and puts the host back as recorded; it also works from the record ``down`` reads.

Identities: the kubelet is ``system:node:<name>`` in ``system:nodes``, bound to the
``system:node`` ClusterRole (this API server authorizes with RBAC only, and that user is the
narrowest subject of the role); kube-proxy is ``system:kube-proxy``, which the built-in
``system:node-proxier`` binding already covers; the API server reaches the kubelet as
``kube-apiserver-kubelet-client``, bound to ``system:kubelet-api-admin``.

:func:`unavailable` decides, before anything starts, whether this machine can run the node at
all: one line naming what is missing.  This module must never start a second real node on a
machine (the lock refuses it) and never signal a process it did not start.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from infercrane_dev.images import build_images

from . import containerd, health, hostlock, hostnet, hoststate
from .binaries import BinaryNotFoundError, find_binary
from .certs import (
    APISERVER_KUBELET_CLIENT_USER,
    CertificateAuthority,
    KeyPair,
    issue_client_cert,
)
from .containerd import ContainerdPaths
from .kubeconfig import build_kubeconfig, write_kubeconfig
from .kubelet import KUBELET_HEALTHZ_PORT, KUBELET_PORT, KubeletPaths, kubelet_args, kubelet_config
from .kubeproxy import HEALTHZ_PORT, METRICS_PORT, kube_proxy_args, kube_proxy_config
from .nodepools import GPU_RESOURCE
from .processes import (
    ManagedProcess,
    ProcessStopError,
    processes_running,
    start_process,
    stop_process,
)
from .processes import wait_until_ready as _wait_until_ready
from .realnodes import RealNodeSpec, gpu_capacity, node_labels, node_name, node_taints

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

NODE_BINARIES = (
    "kubelet",
    "kube-proxy",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    *hostnet.CNI_PLUGINS,
    "infercrane-gpu-device-plugin",
)
# From the host's packages (hack/host-packages.sh installs them).
HOST_COMMANDS = ("runc", "iptables", "ip6tables", "iptables-save", "iptables-restore", "nft", "ip")
FIXED_PORTS = (KUBELET_HEALTHZ_PORT, METRICS_PORT, KUBELET_PORT, HEALTHZ_PORT)
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
DEVICE_PLUGIN_SOCKET = "infercrane-gpu.sock"
KUBELET_GROUPS = ("system:nodes",)
KUBE_PROXY_USER = "system:kube-proxy"
# A unix socket path holds at most 107 bytes.
_MAX_SOCKET_PATH = 107
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The catalog image containerd runs as every Pod's sandbox.
SANDBOX_IMAGE = "pause"


class RealNodeUnavailable(RuntimeError):
    """This machine cannot run a real node now (one line saying why); nothing was started."""


class RealNodeError(RuntimeError):
    """Starting or stopping the real node failed."""


def _cgroups_problem() -> str | None:
    mounts = Path("/proc/self/mounts").read_text(encoding="utf-8").split("\n")
    kinds = {line.split()[2] for line in mounts if len(line.split()) > 2}
    if not kinds & {"cgroup", "cgroup2"}:
        return "the real node needs cgroups, and no cgroup filesystem is mounted"
    return None


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False


def _missing_binary() -> str | None:
    for name in NODE_BINARIES:
        try:
            find_binary(name)
        except BinaryNotFoundError:
            return (
                f"the real node needs {name!r}, which is not in the tools bin dir; run `make tools`"
            )
    for command in HOST_COMMANDS:
        if shutil.which(command, path=_SYSTEM_PATH) is None:
            return f"the real node needs {command!r} on the host; run hack/host-packages.sh as root"
    return None


def _ports_problem() -> str | None:
    taken = [str(port) for port in FIXED_PORTS if _port_taken(port)]
    if taken:
        return f"ports {', '.join(taken)} are in use (another kubelet or kube-proxy runs here)"
    return None


def _network_problem() -> str | None:
    if hostnet.bridge_exists():
        return f"network interface {hostnet.BRIDGE} already exists (left by a real node?)"
    conflicts = hostnet.route_conflicts()
    if conflicts:
        return f"the host already routes the real node's networks: {conflicts[0]}"
    return None


def _root_problem() -> str | None:
    if os.geteuid() != 0:
        return "the real node needs root (it runs containers and programs iptables)"
    return None


# Cheapest first; the lock before the ports, whose holder it names.
_CHECKS: tuple[Callable[[], str | None], ...] = (
    _root_problem,
    _cgroups_problem,
    _missing_binary,
    hostlock.is_locked,
    _ports_problem,
    _network_problem,
)


def unavailable(workdir: Path | None = None) -> str | None:
    """Why a real node cannot start on this machine now (one line), or None.

    Checks root, cgroups, the binaries and host commands, the machine lock, the fixed ports,
    the bridge and routes, and (given the node's ``workdir``) the socket path length.
    """
    for check in _CHECKS:
        problem = check()
        if problem is not None:
            return problem
    # containerd also listens on the address + ".ttrpc".
    longest = f"{NodeLayout(workdir).containerd.address}.ttrpc" if workdir else ""
    if len(longest) > _MAX_SOCKET_PATH:
        return f"workdir {workdir} is too long for containerd's socket path"
    return None


@dataclass(frozen=True)
class NodeLayout:
    """Where every file of the real node lives, inside ``<cluster workdir>/node``."""

    root: Path

    @property
    def containerd(self) -> ContainerdPaths:
        return ContainerdPaths(self.root / "containerd")

    @property
    def kubelet(self) -> KubeletPaths:
        return KubeletPaths(self.root / "kubelet")

    @property
    def cni_bin(self) -> Path:
        return self.root / "cni" / "bin"

    @property
    def cni_conf(self) -> Path:
        return self.root / "cni" / "net.d"

    @property
    def cni_ipam(self) -> Path:
        return self.root / "cni" / "ipam"

    @property
    def kube_proxy_config(self) -> Path:
        return self.root / "kube-proxy.yaml"

    @property
    def kube_proxy_kubeconfig(self) -> Path:
        return self.root / "kube-proxy.kubeconfig"


@dataclass
class RealNodeRuntime:
    """A started (or half-started) real node: enough to tear it down, also from a record."""

    name: str
    layout: NodeLayout
    lock_holder: ManagedProcess | None = None
    baseline: hoststate.HostBaseline | None = None
    # In start order; teardown walks it backwards.
    processes: list[ManagedProcess] = field(default_factory=list)
    # The images the node holds: catalog name (``pause``, ``vllm-openai-standin``, ...) ->
    # the digest-pinned reference a Pod names.
    images: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "images": self.images,
            "root": str(self.layout.root),
            "lock_holder": None if self.lock_holder is None else self.lock_holder.to_record(),
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "processes": [p.to_record() for p in self.processes],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RealNodeRuntime:
        holder = data.get("lock_holder")
        baseline = data.get("baseline")
        return cls(
            name=str(data["name"]),
            layout=NodeLayout(Path(str(data["root"]))),
            lock_holder=None if holder is None else ManagedProcess.from_record(holder),
            baseline=None if baseline is None else hoststate.HostBaseline.from_json(baseline),
            processes=[ManagedProcess.from_record(p) for p in data["processes"]],
            images=dict(data.get("images") or {}),
        )

    def teardown(self, *, grace: float) -> list[str]:
        """Stop everything and put the host back; every step is tried, errors returned."""
        errors: list[str] = []
        daemons = [p for p in self.processes if p.name != "containerd"]
        runtime = [p for p in self.processes if p.name == "containerd"]
        for process in reversed(daemons):
            errors += _stop(process, grace)
        if self.baseline is None:
            # The lock was taken but nothing on the host was touched yet.
            errors += self._release_lock(grace)
            return errors
        # Containers first (their shims outlive containerd), then containerd and the shims.
        errors += hoststate.kill_pod_processes()
        for process in runtime:
            errors += _stop(process, grace)
        errors += _kill_shims(self.layout.containerd.address)
        errors += hoststate.unmount_under(self.layout.root)
        try:
            hostnet.remove_bridge()
        except hostnet.HostNetworkError as error:
            errors.append(str(error))
        errors += hostnet.remove_owned_chains()
        errors += hoststate.restore(self.baseline)
        self.processes = []
        errors += self._release_lock(grace)
        return errors

    def _release_lock(self, grace: float) -> list[str]:
        if self.lock_holder is None:
            return []
        hostlock.release_path()
        errors = _stop(self.lock_holder, grace)
        self.lock_holder = None
        return errors


def _stop(process: ManagedProcess, grace: float) -> list[str]:
    try:
        stop_process(process, grace=grace)
    except (ProcessStopError, OSError) as error:
        return [str(error)]
    return []


def _kill_shims(address: Path) -> list[str]:
    """SIGKILL containerd shims serving ``address`` (they outlive containerd by design)."""
    needle = str(address).encode()
    survivors = []
    for pid in processes_running(
        lambda argv: argv[0].endswith(b"containerd-shim-runc-v2") and needle in argv
    ):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        survivors.append(pid)
    deadline = time.monotonic() + 5.0
    while survivors and time.monotonic() < deadline:
        survivors = [pid for pid in survivors if Path(f"/proc/{pid}/cmdline").exists()]
        time.sleep(0.05)
    return [f"containerd shims survived SIGKILL: {survivors}"] if survivors else []


@dataclass(frozen=True)
class ClusterAccess:
    """What the node needs from its control plane."""

    server: str
    ca: CertificateAuthority
    ca_file: Path
    admin_kubeconfig: Path
    admin_context: str
    logs: Path


class RealNode:
    """Start with :meth:`start`; :attr:`runtime` is what :meth:`RealNodeRuntime.teardown` needs."""

    def __init__(
        self,
        spec: RealNodeSpec,
        cluster: ClusterAccess,
        layout: NodeLayout,
        *,
        product_label: str,
        startup_timeout: float,
        stop_grace: float,
    ) -> None:
        self.spec = spec
        self._cluster = cluster
        self._layout = layout
        self._product_label = product_label
        self._timeout = startup_timeout
        self._grace = stop_grace
        self.runtime = RealNodeRuntime(node_name(socket.gethostname()), layout)

    @property
    def name(self) -> str:
        return self.runtime.name

    def start(self) -> None:
        problem = unavailable(self._layout.root)
        if problem is not None:
            raise RealNodeUnavailable(problem)
        self._layout.root.mkdir(parents=True)
        try:
            self._start()
        except BaseException as exc:
            errors = self.runtime.teardown(grace=self._grace)
            if errors:
                exc.add_note("rollback of the real node also failed: " + "; ".join(errors))
            raise

    def _start(self) -> None:
        runtime, layout, spec = self.runtime, self._layout, self.spec
        runtime.lock_holder = hostlock.acquire(
            layout.root, self._cluster.logs / "real-node-lock.log"
        )
        runtime.baseline = hoststate.HostBaseline.capture()
        built = build_images(find_binary("infercrane-pause").parent, layout.root / "images")
        runtime.images = {image.name.rsplit("/", 1)[1]: image.reference for image in built}
        self._write_files(sandbox_image=runtime.images[SANDBOX_IMAGE])
        self._bind_identities()
        hostnet.ensure_bridge()
        with self._admin() as api:
            paths = layout.containerd
            ctr = find_binary("ctr")
            running = self._spawn(
                "containerd", [str(find_binary("containerd")), *containerd.containerd_args(paths)]
            )
            self._wait(running, lambda: _succeeds(containerd.images, ctr, paths.address))
            containerd.import_images(ctr, paths.address, [image.archive for image in built])
            held = containerd.images(ctr, paths.address)
            missing = sorted(set(runtime.images.values()) - set(held))
            if missing:
                raise RealNodeError(f"images not held after their import: {', '.join(missing)}")
            kubelet = self._spawn(
                "kubelet",
                [
                    str(find_binary("kubelet")),
                    *kubelet_args(
                        layout.kubelet,
                        node_ip=hostnet.NODE_IP,
                        labels=node_labels(spec, product_label=self._product_label),
                    ),
                ],
            )
            self._wait(kubelet, functools.partial(_node_ready, api, self.name))
            plugin = self._spawn("infercrane-gpu-device-plugin", self._device_plugin_argv())
            self._wait(plugin, functools.partial(_node_gpus, api, self.name, spec.gpus))
            proxy = self._spawn(
                "kube-proxy",
                [str(find_binary("kube-proxy")), *kube_proxy_args(layout.kube_proxy_config)],
            )
            self._wait(proxy, functools.partial(health.plain_endpoint_ok, HEALTHZ_PORT, "/healthz"))

    def _device_plugin_argv(self) -> list[str]:
        return [
            str(find_binary("infercrane-gpu-device-plugin")),
            f"--resource-name={GPU_RESOURCE}",
            f"--count={self.spec.gpus}",
            f"--plugin-dir={DEVICE_PLUGIN_DIR}",
            f"--socket-name={DEVICE_PLUGIN_SOCKET}",
            f"--product={self.spec.product}",
        ]

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        bin_dir = find_binary("containerd").parent
        process = start_process(
            name,
            argv,
            self._cluster.logs / f"{name}.log",
            cwd=self._layout.root,
            # containerd finds its shim, and everyone runc/iptables, on PATH.
            env={**os.environ, "PATH": f"{bin_dir}:{_SYSTEM_PATH}"},
        )
        self.runtime.processes.append(process)
        return process

    def _wait(self, process: ManagedProcess, probe: Callable[[], bool]) -> None:
        _wait_until_ready(process, probe, timeout=self._timeout)

    def _admin(self) -> ApiClient:
        from .controlplane import new_api_client

        return new_api_client(self._cluster.admin_kubeconfig, self._cluster.admin_context)

    def _write_files(self, *, sandbox_image: str) -> None:
        layout, cluster = self._layout, self._cluster
        paths = layout.containerd
        for directory in (paths.base, layout.cni_bin, layout.cni_conf, layout.kubelet.base):
            directory.mkdir(parents=True, exist_ok=True)
        runc = shutil.which("runc", path=_SYSTEM_PATH)
        assert runc is not None  # unavailable() checked it
        config = containerd.containerd_config(
            paths,
            runc=Path(runc),
            sandbox_image=sandbox_image,
            cni_bin_dir=layout.cni_bin,
            cni_conf_dir=layout.cni_conf,
        )
        paths.config.write_text(containerd.to_toml(config), encoding="utf-8")
        hosts = paths.registry_hosts / "_default" / "hosts.toml"
        hosts.parent.mkdir(parents=True)
        hosts.write_text(containerd.to_toml(containerd.registry_hosts()), encoding="utf-8")
        for plugin in hostnet.CNI_PLUGINS:
            (layout.cni_bin / plugin).symlink_to(find_binary(plugin))
        conflist = layout.cni_conf / "10-infercrane.conflist"
        conflist.write_text(
            json.dumps(hostnet.cni_conflist(layout.cni_ipam), indent=2), encoding="utf-8"
        )
        kubelet = layout.kubelet
        kubelet.config.write_text(
            yaml.safe_dump(
                kubelet_config(
                    kubelet,
                    runtime_endpoint=f"unix://{paths.address}",
                    client_ca=cluster.ca_file,
                    node_ip=hostnet.NODE_IP,
                    taints=node_taints(),
                )
            ),
            encoding="utf-8",
        )
        node_user = f"system:node:{self.name}"
        self._write_kubeconfig(
            kubelet.kubeconfig, node_user, issue_client_cert(cluster.ca, node_user, KUBELET_GROUPS)
        )
        self._write_kubeconfig(
            layout.kube_proxy_kubeconfig,
            KUBE_PROXY_USER,
            issue_client_cert(cluster.ca, KUBE_PROXY_USER),
        )
        layout.kube_proxy_config.write_text(
            yaml.safe_dump(
                kube_proxy_config(
                    kubeconfig=layout.kube_proxy_kubeconfig,
                    node_name=self.name,
                    cluster_cidr=hostnet.POD_SUBNET,
                    node_ip=hostnet.NODE_IP,
                )
            ),
            encoding="utf-8",
        )

    def _write_kubeconfig(self, path: Path, user: str, pair: KeyPair) -> None:
        cluster = self._cluster
        write_kubeconfig(
            path,
            build_kubeconfig(
                cluster.server, cluster.ca.cert_pem, {user: pair}, current_context=user
            ),
        )

    def _bind_identities(self) -> None:
        from kubernetes.client import RbacAuthorizationV1Api

        with self._admin() as api:
            rbac = RbacAuthorizationV1Api(api)
            for binding in identity_bindings(self.name):
                rbac.create_cluster_role_binding(binding)  # type: ignore[arg-type]


def identity_bindings(name: str) -> list[dict[str, Any]]:
    """ClusterRoleBindings the node's identities need beyond the built-in ones (pure)."""

    def binding(role: str, user: str) -> dict[str, Any]:
        return {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"infercrane-real-node:{role.removeprefix('system:')}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }

    return [
        binding("system:node", f"system:node:{name}"),
        binding("system:kubelet-api-admin", APISERVER_KUBELET_CLIENT_USER),
    ]


def _succeeds(call: Callable[..., object], *args: object) -> bool:
    call(*args)
    return True


def _read_node(api: ApiClient, name: str) -> dict[str, Any] | None:
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException

    try:
        node = CoreV1Api(api).read_node(name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    as_json: dict[str, Any] = api.sanitize_for_serialization(node)  # type: ignore[no-untyped-call]
    return as_json


def _node_ready(api: ApiClient, name: str) -> bool:
    node = _read_node(api, name)
    conditions = (node or {}).get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _node_gpus(api: ApiClient, name: str, gpus: int) -> bool:
    node = _read_node(api, name)
    return node is not None and gpu_capacity(node, GPU_RESOURCE) == gpus
