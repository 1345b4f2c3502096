"""A disposable Kind cluster's lifecycle: prepare what it is made of, start it, tear it down.

:func:`prepare` needs neither root's lock nor Docker: the Debian base (:mod:`.baseimage`), the
images kubeadm runs (:mod:`.kubeimages`), the stand-in images (:mod:`infercrane_dev.images`),
and the node image's plan (:mod:`.nodeimage`). ``make test`` runs it in the background while
other suites use the machine. :meth:`KindRuntime.start` then, each step recorded as it is taken
(in ``<workdir>/kind.json``, so that the record's teardown is the rollback and ``down`` can
read it):

1. takes the machine's real-node lock (:mod:`infercrane_dev.localcluster.hostlock`, held by a
   holder process until teardown) and records the host (:mod:`.hostguard`);
2. starts dockerd (:mod:`.docker`) and builds the node image unless Docker holds it already;
3. ``kind create cluster`` (one control plane, the GPU pools' workers), then the Pod network
   (:mod:`.network`), and waits until every node is Ready;
4. ``kind load image-archive`` of the stand-in images, the runner image and PostgreSQL's into
   every node, each also tagged ``<repository>@<manifest digest>`` (the name the CRI resolves
   a digest-pinned reference by);
5. the device plugin's DaemonSet per pool, until each GPU worker allocates its GPUs;
6. a route of the Service range to a GPU worker, so that this host reaches a Service's
   ClusterIP as the real node's scenarios do (kube-proxy in the node takes it from there);
7. waits for CoreDNS;
8. with KServe (``KindSpec.kserve``), loads its controller's image and installs it
   (:mod:`.kserve`), until its Deployment is available.

:meth:`KindRuntime.teardown` undoes all of it in reverse, whatever was reached, and puts the
host back as recorded; the lock goes last.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from infercrane_dev import REPO_ROOT
from infercrane_dev.images import BuiltImage, Sources, build_image, build_images
from infercrane_dev.images.postgres import build_postgres
from infercrane_dev.images.runner import build_runner
from infercrane_dev.localcluster import hostlock
from infercrane_dev.localcluster.admin import new_api_client
from infercrane_dev.localcluster.containerd import archive_images, digest_reference
from infercrane_dev.localcluster.hoststate import HostBaseline
from infercrane_dev.localcluster.kserve import KServeFiles
from infercrane_dev.localcluster.nodepools import GPU_RESOURCE, parse_node_pool
from infercrane_dev.localcluster.processes import ManagedProcess, stop_process
from infercrane_dev.localcluster.realnodes import gpu_capacity
from infercrane_dev.toolchain import find_binary

from . import hostguard, kserve, kubeimages, network, nodeimage
from .baseimage import ensure_base
from .clusterconfig import (
    DEVICE_PLUGIN_NAMESPACE,
    SERVICE_SUBNET,
    KindSpec,
    device_plugin_daemonset,
    kind_config,
)
from .docker import Docker, DockerPaths, start_dockerd, stop_dockerd
from .hostchecks import unavailable

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

T = TypeVar("T")
RECORD = "kind.json"
LOCK_HOLDER = "a Kind cluster"
DEVICE_PLUGIN_IMAGE = "gpu-device-plugin"
READY_SECONDS = 240.0
NETWORK = "kind"  # kind's Docker network


class KindError(RuntimeError):
    """Starting or stopping the Kind cluster failed (one line)."""


class KindUnavailable(KindError):
    """This machine cannot run the Kind cluster now (one line); nothing was started."""


def _say(text: str) -> None:
    print(f"kind: {text}", file=sys.stderr, flush=True)


def poll(probe: Callable[[], T | None], *, timeout: float, what: str) -> T:
    """``probe``'s first truthy answer, polled with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise KindError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(1.0)


@dataclass(frozen=True)
class Prepared:
    """What a cluster is made of, ready before any lock is taken."""

    node_image: nodeimage.NodeImagePlan
    standins: list[BuiltImage]
    runner: BuiltImage  # the provider's runner image (deploy/kubernetes/runner)
    postgres: BuiltImage  # a state backend for runners inside the cluster
    kserve: BuiltImage | None = None  # KServe's controller, for a cluster with KServe


def prepare(
    spec: KindSpec,
    bin_dir: Path,
    *,
    cache: Path,
    log: Path | None = None,
    record_base: bool = False,
) -> Prepared:
    """The node image's inputs and the stand-in images (cached; the first run takes minutes).

    Under the cache's lock: two runs on one machine (two engineers' suites) share the cache.
    """
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        base = ensure_base(cache, record=record_base, log=log)
        references = kubeimages.required_references(bin_dir / "kubeadm", spec.kubernetes_version)
        images = kubeimages.build_kubernetes_images(
            bin_dir,
            references,
            out_dir=cache / "kube-images" / spec.kubernetes_version,
            deb_cache=cache / "debs",
        )
        plan = nodeimage.plan(
            bin_dir, base, images=images, kubernetes_version=spec.kubernetes_version
        )
        standins = build_images(bin_dir, cache / "standins")
        runner = build_runner(
            bin_dir, REPO_ROOT, out_dir=cache / "runner", deb_cache=cache / "debs"
        )
        postgres = build_postgres(bin_dir, out_dir=cache / "postgres", deb_cache=cache / "debs")
        manager = _kserve_image(bin_dir, cache) if spec.kserve else None
    return Prepared(plan, standins, runner, postgres, manager)


def _kserve_image(bin_dir: Path, cache: Path) -> BuiltImage:
    """KServe's controller, tagged with the KServe version it was built from."""
    return build_image(
        kserve.manager_image(),
        Sources(bin_dir),
        name=kserve.REPOSITORY,
        tag=kserve.manager_version(bin_dir / kserve.MANAGER),
        out_dir=cache / "kserve",
    )


@dataclass
class KindRuntime:
    """A started (or half-started) Kind cluster: enough to tear it down, also from a record."""

    spec: KindSpec
    workdir: Path
    data_root: Path
    lock_holder: ManagedProcess | None = None
    baseline: HostBaseline | None = None
    dockerd: ManagedProcess | None = None
    created: bool = False
    bridge: str | None = None
    route_via: str | None = None
    # catalog name -> the digest-pinned reference a Pod names (pause, vllm-openai-standin, ...)
    images: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def context(self) -> str:
        return self.spec.context

    @property
    def docker(self) -> Docker:
        return Docker(DockerPaths(self.workdir, self.data_root), os.environ)

    # -- the record ---------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "kubernetes_version": self.spec.kubernetes_version,
            "name": self.spec.name,
            "pools": [pool.spec for pool in self.spec.pools],
            "product_label": self.spec.product_label,
            "kserve": self.spec.kserve,
            "workdir": str(self.workdir),
            "data_root": str(self.data_root),
            "lock_holder": None if self.lock_holder is None else self.lock_holder.to_record(),
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "dockerd": None if self.dockerd is None else self.dockerd.to_record(),
            "created": self.created,
            "bridge": self.bridge,
            "route_via": self.route_via,
            "images": self.images,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KindRuntime:
        def process(key: str) -> ManagedProcess | None:
            found = data.get(key)
            return None if found is None else ManagedProcess.from_record(found)

        spec = KindSpec(
            kubernetes_version=str(data["kubernetes_version"]),
            name=str(data["name"]),
            pools=tuple(parse_node_pool(p) for p in data["pools"]),
            product_label=str(data["product_label"]),
            kserve=bool(data.get("kserve")),
        )
        baseline = data.get("baseline")
        return cls(
            spec=spec,
            workdir=Path(data["workdir"]),
            data_root=Path(data["data_root"]),
            lock_holder=process("lock_holder"),
            baseline=None if baseline is None else HostBaseline.from_json(baseline),
            dockerd=process("dockerd"),
            created=bool(data["created"]),
            bridge=data.get("bridge"),
            route_via=data.get("route_via"),
            images=dict(data.get("images") or {}),
            seconds=dict(data.get("seconds") or {}),
        )

    def save(self) -> None:
        path = self.workdir / RECORD
        staged = path.with_name(f".{RECORD}.partial")
        staged.write_text(json.dumps(self.to_json(), indent=2), encoding="utf-8")
        os.replace(staged, path)

    @classmethod
    def load(cls, workdir: Path) -> KindRuntime | None:
        try:
            data = json.loads((workdir / RECORD).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return cls.from_json(data)

    # -- starting -----------------------------------------------------------------------

    def start(self, prepared: Prepared, bin_dir: Path) -> None:
        """Start the cluster (see the module's docstring); on any failure, tear down first."""
        problem = unavailable()
        if problem is not None:
            raise KindUnavailable(problem)
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._start(prepared, bin_dir)
        except BaseException as failure:
            errors = self.teardown()
            if errors:
                failure.add_note("tearing the Kind cluster down also failed: " + "; ".join(errors))
            raise

    def _timed(self, what: str, step: Callable[[], T]) -> T:
        started = time.monotonic()
        result = step()
        self.seconds[what] = round(time.monotonic() - started, 1)
        self.save()
        return result

    def _start(self, prepared: Prepared, bin_dir: Path) -> None:
        logs = self.workdir / "logs"
        try:
            self.lock_holder = hostlock.acquire(self.workdir, logs / "lock.log", what=LOCK_HOLDER)
        except hostlock.HostLockedError as held:
            raise KindUnavailable(str(held)) from None
        self.save()
        self.baseline = hostguard.capture()
        self.save()
        docker = self.docker
        self.dockerd = start_dockerd(
            docker, runtime=bin_dir / "infercrane-runc-capfilter", log=logs / "dockerd.log"
        )
        self.save()
        if not nodeimage.current(docker, prepared.node_image):
            _say(f"building {prepared.node_image.reference} (key {prepared.node_image.key})")
            self._timed("node image", lambda: nodeimage.build(docker, prepared.node_image))
        self._timed("create", lambda: self._create(prepared, bin_dir))
        with new_api_client(self.kubeconfig, self.context) as api:
            self._timed("network", lambda: self._network(api))
            images = [*prepared.standins, prepared.runner, prepared.postgres]
            self._timed("images", lambda: self._load_images(images, bin_dir))
            self._timed("gpus", lambda: self._device_plugins(api))
            self._route()
            self._timed("dns", lambda: _wait_available(api, "kube-system", "coredns"))
            if prepared.kserve is not None:
                manager = prepared.kserve
                self._timed("kserve", lambda: self._install_kserve(api, manager, bin_dir))

    def _kind(self, bin_dir: Path, *args: str) -> None:
        log = self.workdir / "logs" / "kind.log"
        with log.open("ab") as out:
            done = _run_logged([str(bin_dir / "kind"), *args], out, self.docker.env)
        if done != 0:
            raise KindError(f"kind {' '.join(args[:2])} failed (exit {done}); log {log}")

    def _create(self, prepared: Prepared, bin_dir: Path) -> None:
        existing = _kind_output(bin_dir, self.docker.env, "get", "clusters").split()
        if self.spec.name in existing:
            _say(f"deleting cluster {self.spec.name} a killed run left in {self.data_root}")
            self._kind(bin_dir, "delete", "cluster", "--name", self.spec.name)
        config = self.workdir / "kind-config.yaml"
        config.write_text(yaml.safe_dump(kind_config(self.spec)), encoding="utf-8")
        self.created = True  # from here a failed create may leave nodes: delete them
        self.save()
        self._kind(
            bin_dir,
            "create",
            "cluster",
            "--name",
            self.spec.name,
            "--image",
            prepared.node_image.reference,
            "--config",
            str(config),
            "--kubeconfig",
            str(self.kubeconfig),
        )
        found = self.docker.inspect("network", NETWORK)
        self.bridge = None if found is None else f"br-{found['Id'][:12]}"
        self.save()

    def nodes(self) -> list[str]:
        label = f"io.x-k8s.kind.cluster={self.spec.name}"
        return self.docker.output(
            "ps", "--filter", f"label={label}", "--format", "{{.Names}}"
        ).split()

    def stop_node(self, node: str) -> None:
        """``docker stop`` of a node, as a machine that goes down (its Pods stay bound)."""
        self.docker.run("stop", node)

    def start_node(self, node: str) -> None:
        """``docker start`` of a stopped node: its systemd starts the routes, then the kubelet."""
        self.docker.run("start", node)

    def node_ip(self, node: str) -> str:
        found = self.docker.inspect("container", node) or {}
        return str(found["NetworkSettings"]["Networks"][NETWORK]["IPAddress"])

    def _network(self, api: ApiClient) -> None:
        def addresses() -> list[network.NodeAddress] | None:
            nodes = _list_nodes(api)
            if len(nodes) != len(self.nodes()) or not all(n["spec"].get("podCIDR") for n in nodes):
                return None
            return [
                network.NodeAddress(name, self.node_ip(name), n["spec"]["podCIDR"])
                for n in nodes
                if (name := n["metadata"]["name"])
            ]

        found = poll(addresses, timeout=READY_SECONDS, what="every node's Pod range")
        for name, planned in network.node_networks(found).items():
            conflist = json.dumps(planned.conflist, indent=2).encode()
            self.docker.exec(name, ["sh", "-c", f"cat > {network.CONFLIST_PATH}"], stdin=conflist)
            unit = network.routes_unit(planned.routes).encode()
            self.docker.exec(name, ["sh", "-c", f"cat > {network.ROUTES_UNIT_PATH}"], stdin=unit)
            self.docker.exec(name, ["systemctl", "daemon-reload"])
            self.docker.exec(name, ["systemctl", "enable", "--now", network.ROUTES_UNIT])
        poll(
            lambda: all(_condition(n, "Ready") for n in _list_nodes(api)),
            timeout=READY_SECONDS,
            what="every node Ready",
        )

    def _load_images(self, images: list[BuiltImage], bin_dir: Path) -> None:
        for image in images:
            self._kind(
                bin_dir, "load", "image-archive", str(image.archive), "--name", self.spec.name
            )
            # kind imports with --digests, which names the image after the archive's index.
            for name, digest in archive_images(image.archive):
                for node in self.nodes():
                    tag = ["ctr", "--namespace=k8s.io", "images", "tag", "--force"]
                    self.docker.exec(node, [*tag, name, digest_reference(name, digest)])
            self.images[image.name.rsplit("/", 1)[1]] = image.reference
        self.save()

    def _device_plugins(self, api: ApiClient) -> None:
        from kubernetes.client import AppsV1Api

        image = self.images[DEVICE_PLUGIN_IMAGE]
        for pool in self.spec.pools:
            body = device_plugin_daemonset(pool, image=image, product_label=self.spec.product_label)
            AppsV1Api(api).create_namespaced_daemon_set(DEVICE_PLUGIN_NAMESPACE, body)  # type: ignore[arg-type]

        def advertised() -> bool:
            nodes = _list_nodes(api)
            return all(
                [
                    gpu_capacity(n, GPU_RESOURCE)
                    for n in nodes
                    if _product(n, self.spec) == pool.product
                ]
                == [pool.gpus_per_node] * pool.nodes
                for pool in self.spec.pools
            )

        poll(advertised, timeout=READY_SECONDS, what="every GPU worker's GPUs")

    def _install_kserve(self, api: ApiClient, manager: BuiltImage, bin_dir: Path) -> None:
        self._load_images([manager], bin_dir)
        files = KServeFiles.beside(bin_dir / kserve.MANAGER)
        name = kserve.install(api, files, image=manager.reference, timeout=READY_SECONDS)
        _wait_available(api, kserve.NAMESPACE, name)

    def _route(self) -> None:
        worker = next(n for n in sorted(self.nodes()) if not n.endswith("control-plane"))
        via = self.node_ip(worker)
        hostguard.add_service_route(SERVICE_SUBNET, via)
        self.route_via = via
        self.save()

    # -- tearing down -------------------------------------------------------------------

    def teardown(self) -> list[str]:
        """Delete the cluster, stop dockerd, put the host back, release the lock; every step is
        tried, errors are returned."""
        errors: list[str] = []
        if self.route_via is not None:
            errors += hostguard.remove_service_route(SERVICE_SUBNET, self.route_via)
            self.route_via = None
        docker = self.docker
        if self.dockerd is not None:
            if self.created and self.dockerd.is_running():
                bin_dir = find_binary("kind").parent
                delete = ("delete", "cluster", "--name", self.spec.name)
                errors += _attempt(lambda: self._kind(bin_dir, *delete))
            if self.dockerd.is_running() and docker.inspect("network", NETWORK) is not None:
                errors += _attempt(lambda: docker.run("network", "rm", NETWORK))
            errors += stop_dockerd(self.dockerd)
            self.dockerd = None
        self.created = False
        if self.baseline is not None:
            errors += hostguard.restore(self.baseline, docker.paths, bridge=self.bridge)
            self.baseline = None
        holder, self.lock_holder = self.lock_holder, None
        if holder is not None:
            hostlock.release_path()
            errors += _attempt(lambda: stop_process(holder, grace=5.0))
        self.save()
        return errors


def _attempt(step: Callable[[], object]) -> list[str]:
    try:
        step()
    except (OSError, RuntimeError) as error:
        return [str(error)]
    return []


def _run_logged(argv: list[str], out: Any, env: Mapping[str, str]) -> int:
    return subprocess.run(argv, stdout=out, stderr=out, env=dict(env), check=False).returncode


def _kind_output(bin_dir: Path, env: Mapping[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(bin_dir / "kind"), *args], capture_output=True, text=True, env=dict(env), check=False
    )
    return done.stdout


def _list_nodes(api: ApiClient) -> list[dict[str, Any]]:
    """The Nodes as the API's JSON (the generated models type every field optional)."""
    from kubernetes.client import CoreV1Api

    response: Any = CoreV1Api(api).list_node(_preload_content=False)
    items: list[dict[str, Any]] = json.loads(response.data)["items"]
    return items


def _product(node: Mapping[str, Any], spec: KindSpec) -> str | None:
    return (node["metadata"].get("labels") or {}).get(spec.product_label)


def _condition(obj: Mapping[str, Any], kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _wait_available(api: ApiClient, namespace: str, name: str) -> None:
    from kubernetes.client import AppsV1Api

    def available() -> bool:
        response: Any = AppsV1Api(api).read_namespaced_deployment(
            name, namespace, _preload_content=False
        )
        return _condition(json.loads(response.data), "Available")

    poll(available, timeout=READY_SECONDS, what=f"Deployment {namespace}/{name} available")
