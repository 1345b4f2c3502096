"""A real node of the local control plane: this machine runs a kubelet whose Pods really run.

Start order (each step's readiness polled with a deadline while watching for early exit, and
everything rolled back if one fails): the machine lock's holder (:mod:`.hostlock`), a record
of the host (:mod:`.hoststate`), the node's files (:mod:`.nodefiles`), the bridge
(:mod:`.hostnet`), containerd (then the stand-in images of :mod:`infercrane_dev.images`, built
from the tools bin dir, are imported), the kubelet (Ready in the API), the fake-GPU device
plugin (the Node allocates the GPUs), kube-proxy (healthy).  Each step is recorded as it is
taken (:class:`.noderuntime.RealNodeRuntime`), so the record's teardown is the rollback, and
written to the machine's record (:mod:`.noderecord`), so that the next start puts back what a
killed run left; :func:`.hostchecks.unavailable` decides, before anything starts, whether this
machine can run the node at all.

Identities: the kubelet is ``system:node:<name>`` in ``system:nodes``, bound to the
``system:node`` ClusterRole (this API server authorizes with RBAC only, and that user is the
narrowest subject of the role); kube-proxy is ``system:kube-proxy``, which the built-in
``system:node-proxier`` binding already covers; the API server reaches the kubelet as
``kube-apiserver-kubelet-client``, bound to ``system:kubelet-api-admin``.

This module must never start a second real node on a machine (the lock refuses it) and never
signal a process it did not start.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infercrane_dev.images import build_images
from infercrane_dev.toolchain import SYSTEM_PATH, find_binary

from . import containerd, health, hostlock, hostnet, hoststate, noderecord
from .admin import new_api_client
from .certs import APISERVER_KUBELET_CLIENT_USER, CertificateAuthority, kubelet_user
from .deviceplugin import device_plugin_args
from .hostchecks import RealNodeUnavailable, unavailable
from .kubelet import kubelet_args
from .kubeproxy import HEALTHZ_PORT, kube_proxy_args
from .layout import NodeLayout
from .nodefiles import write_node_files
from .nodepools import GPU_RESOURCE
from .noderuntime import RealNodeRuntime, reclaim_abandoned
from .processes import ManagedProcess, start_process
from .processes import wait_until_ready as _wait_until_ready
from .realnodes import RealNodeSpec, gpu_capacity, node_labels, node_name

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

# The catalog image containerd runs as every Pod's sandbox.
SANDBOX_IMAGE = "pause"


class RealNodeError(RuntimeError):
    """Starting or stopping the real node failed."""


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
        self._check_machine()
        reclaimed = reclaim_abandoned(grace=self._grace)
        if reclaimed is not None:
            done, errors = reclaimed
            if errors:
                raise RealNodeUnavailable(f"could not {done}: {'; '.join(errors)}")
            print(f"localcluster: {done}", file=sys.stderr)
            self._check_machine()
        self._layout.root.mkdir(parents=True)
        try:
            self._start()
        except BaseException as exc:
            errors = self.runtime.teardown(grace=self._grace)
            if errors:
                exc.add_note("rollback of the real node also failed: " + "; ".join(errors))
            raise

    def detach(self) -> None:
        """Hand the node to whoever tears it down from the runtime record (``down``)."""
        noderecord.save(self.runtime.to_json(), owner=None)

    def _check_machine(self) -> None:
        problem = unavailable(self._layout.root)
        if problem is not None:
            raise RealNodeUnavailable(problem)

    def _record(self) -> None:
        noderecord.save(self.runtime.to_json(), owner=os.getpid())

    def _start(self) -> None:
        runtime, layout, spec, cluster = self.runtime, self._layout, self.spec, self._cluster
        runtime.lock_holder = hostlock.acquire(layout.root, cluster.logs / "real-node-lock.log")
        self._record()
        runtime.baseline = hoststate.HostBaseline.capture()
        self._record()
        built = build_images(find_binary("infercrane-pause").parent, layout.root / "images")
        runtime.images = {image.name.rsplit("/", 1)[1]: image.reference for image in built}
        write_node_files(
            layout,
            node_name=self.name,
            server=cluster.server,
            ca=cluster.ca,
            ca_file=cluster.ca_file,
            sandbox_image=runtime.images[SANDBOX_IMAGE],
        )
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
            plugin = self._spawn(
                "infercrane-gpu-device-plugin",
                [
                    str(find_binary("infercrane-gpu-device-plugin")),
                    *device_plugin_args(product=spec.product, gpus=spec.gpus),
                ],
            )
            self._wait(plugin, functools.partial(_node_gpus, api, self.name, spec.gpus))
            proxy = self._spawn(
                "kube-proxy",
                [str(find_binary("kube-proxy")), *kube_proxy_args(layout.kube_proxy_config)],
            )
            self._wait(proxy, functools.partial(health.plain_endpoint_ok, HEALTHZ_PORT, "/healthz"))

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        bin_dir = find_binary("containerd").parent
        process = start_process(
            name,
            argv,
            self._cluster.logs / f"{name}.log",
            cwd=self._layout.root,
            # containerd finds its shim, and everyone runc/iptables, on PATH.
            env={**os.environ, "PATH": f"{bin_dir}:{SYSTEM_PATH}"},
        )
        self.runtime.processes.append(process)
        self._record()
        return process

    def _wait(self, process: ManagedProcess, probe: Callable[[], bool]) -> None:
        _wait_until_ready(process, probe, timeout=self._timeout)

    def _admin(self) -> ApiClient:
        return new_api_client(self._cluster.admin_kubeconfig, self._cluster.admin_context)

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
        binding("system:node", kubelet_user(name)),
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
