"""The Docker daemon a Kind cluster runs on: Debian's dockerd (``hack/host-packages.sh``),
started and stopped by us, never a service, and its CLI.

Everything it can keep in our directories it does: the socket, exec root, pid file and trust key
in the cluster's workdir (the key's default is ``/etc/docker/key.json``), the data root (images,
so a node image built once is reused) in the cache. What it changes on the host it must not
change, it is told not to: no ``docker0`` bridge (``bridge: none``; kind makes its own
network), no iptables rules, no IP forwarding or masquerading (the nodes never leave this
machine). Its containers run under ``infercrane-runc-capfilter`` (``hack/tools``,
``infercrane-node``), which drops the capabilities this machine's bounding set lacks before
runc starts a privileged container; without it, no Kind node starts on a VM without
``CAP_SYS_RESOURCE``.

The CLI is Debian's ``/usr/bin/docker``, found by absolute path: another ``docker`` earlier on
``PATH`` (a newer static client) is not the pinned one. Kind finds it on the ``PATH`` given in
:func:`client_env`, with ``DOCKER_HOST`` naming our socket and ``DOCKER_CONFIG`` our workdir.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercrane_dev.localcluster.processes import (
    ManagedProcess,
    start_process,
    stop_process,
    wait_until_ready,
)

DOCKERD = Path("/usr/sbin/dockerd")
DOCKER = Path("/usr/bin/docker")
# Where kind and every docker command find Debian's client (and nothing else of ours).
CLIENT_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
RUNTIME_NAME = "infercrane-capfilter"
START_SECONDS = 60.0


class DockerError(RuntimeError):
    """A docker command failed (the message names it and quotes its last line)."""


@dataclass(frozen=True)
class DockerPaths:
    """A daemon's directories: ``workdir`` per cluster, ``data_root`` kept between clusters."""

    workdir: Path
    data_root: Path

    @property
    def socket(self) -> Path:
        return self.workdir / "docker.sock"

    @property
    def exec_root(self) -> Path:
        # Short: containerd's socket lives under it, and a unix socket path holds 107 bytes.
        return self.workdir / "x"

    @property
    def config(self) -> Path:
        return self.workdir / "daemon.json"

    @property
    def client_config(self) -> Path:
        return self.workdir / "docker-client"


def daemon_config(paths: DockerPaths, runtime: Path) -> dict[str, Any]:
    """dockerd's configuration file (``--config-file``): nothing outside our paths."""
    return {
        "data-root": str(paths.data_root),
        "exec-root": str(paths.exec_root),
        "pidfile": str(paths.workdir / "dockerd.pid"),
        "deprecated-key-path": str(paths.workdir / "key.json"),
        "hosts": [f"unix://{paths.socket}"],
        "storage-driver": "overlay2",
        "bridge": "none",
        "iptables": False,
        "ip6tables": False,
        "ip-forward": False,
        "ip-masq": False,
        # Without iptables, a published port (the API server's) is served by docker-proxy.
        "userland-proxy": True,
        "exec-opts": ["native.cgroupdriver=cgroupfs"],
        "runtimes": {RUNTIME_NAME: {"path": str(runtime)}},
        "default-runtime": RUNTIME_NAME,
        "log-driver": "json-file",
    }


def client_env(paths: DockerPaths, base: Mapping[str, str]) -> dict[str, str]:
    """The environment of a docker or kind command talking to this daemon."""
    kept = {k: v for k, v in base.items() if not k.startswith(("DOCKER_", "KIND_"))}
    return kept | {
        "DOCKER_HOST": f"unix://{paths.socket}",
        "DOCKER_CONFIG": str(paths.client_config),
        "PATH": CLIENT_PATH,
    }


class Docker:
    """The CLI against one daemon."""

    def __init__(self, paths: DockerPaths, environ: Mapping[str, str]) -> None:
        self.paths = paths
        self.env = client_env(paths, environ)

    def run(
        self, *args: str, stdin: bytes | None = None, timeout: float = 600.0
    ) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            [str(DOCKER), *args],
            input=stdin,
            capture_output=True,
            env=self.env,
            check=False,
            timeout=timeout,
        )
        if done.returncode != 0:
            last = (done.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise DockerError(f"docker {' '.join(args[:2])}: {last}")
        return done

    def output(self, *args: str) -> str:
        return self.run(*args).stdout.decode().strip()

    def inspect(self, kind: str, name: str) -> dict[str, Any] | None:
        """``docker <kind> inspect`` as JSON, or None when there is no such object."""
        done = subprocess.run(
            [str(DOCKER), kind, "inspect", name],
            capture_output=True,
            env=self.env,
            check=False,
        )
        if done.returncode != 0:
            return None
        [found] = json.loads(done.stdout)
        result: dict[str, Any] = found
        return result

    def exec(self, container: str, argv: Sequence[str], *, stdin: bytes | None = None) -> str:
        flags = ["-i"] if stdin is not None else []
        return self.run("exec", *flags, container, *argv, stdin=stdin).stdout.decode()

    def succeeds(self, *args: str) -> bool:
        done = subprocess.run(
            [str(DOCKER), *args], capture_output=True, env=self.env, check=False, timeout=60
        )
        return done.returncode == 0

    def responds(self) -> bool:
        return self.succeeds("version", "--format", "{{.Server.Version}}")


def start_dockerd(docker: Docker, *, runtime: Path, log: Path) -> ManagedProcess:
    """Start the daemon ``docker`` talks to, on its paths, and wait until it answers."""
    paths = docker.paths
    paths.workdir.mkdir(parents=True, exist_ok=True)
    paths.data_root.mkdir(parents=True, exist_ok=True)
    paths.client_config.mkdir(exist_ok=True)
    paths.config.write_text(json.dumps(daemon_config(paths, runtime), indent=2), encoding="utf-8")
    process = start_process(
        "dockerd",
        [str(DOCKERD), "--config-file", str(paths.config)],
        log,
        env={"PATH": CLIENT_PATH},
        cwd=paths.workdir,
    )
    wait_until_ready(process, docker.responds, timeout=START_SECONDS, interval=0.5)
    return process


def stop_dockerd(process: ManagedProcess) -> list[str]:
    """Stop dockerd (and the containerd it supervises); errors as lines."""
    try:
        # dockerd stops its containers first; kind's are gone already.
        stop_process(process, grace=30.0)
    except (OSError, RuntimeError) as error:
        return [str(error)]
    return []
