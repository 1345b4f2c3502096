"""LocalControlPlane lifecycle and the up/down CLI, driven by fake daemons.

The fakes are small Python servers named like the real binaries: they check
the flags they are given, then answer the readiness endpoint the control plane
polls (plain HTTP for etcd, TLS with our certs for the others).  An env var per
fake makes it crash or hang, to exercise rollback.  No Kubernetes binary runs.
"""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from infercrane_dev.localcluster.__main__ import main
from infercrane_dev.localcluster.controlplane import (
    ControlPlaneBinaries,
    ControlPlaneError,
    LocalControlPlane,
)
from infercrane_dev.localcluster.processes import ProcessStartError, group_members
from infercrane_dev.localcluster.state import STATE_FILE, load_state
from infercrane_dev.toolchain import TOOLS_BIN_ENV, BinaryNotFoundError, repo_root

FAKE_DAEMON = r"""
import http.server, os, ssl, subprocess, sys, time

name = os.path.basename(sys.argv[0])
flags = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
REQUIRED = {
    "etcd": {"data-dir": None, "listen-client-urls": None, "listen-peer-urls": None,
             "initial-cluster": None},
    "kube-apiserver": {
        "etcd-servers": None, "secure-port": None, "tls-cert-file": None,
        "tls-private-key-file": None, "client-ca-file": None, "authorization-mode": "RBAC",
        "advertise-address": "127.0.0.1", "bind-address": "127.0.0.1",
        "endpoint-reconciler-type": "none", "service-account-issuer": None,
        "service-account-key-file": None, "service-account-signing-key-file": None,
    },
    "kube-controller-manager": {
        "kubeconfig": None, "leader-elect": "false",
        "use-service-account-credentials": "false", "controllers": "*",
        "bind-address": "127.0.0.1", "secure-port": None,
        "service-account-private-key-file": None, "root-ca-file": None,
    },
    "kube-scheduler": {
        "kubeconfig": None, "leader-elect": "false", "bind-address": "127.0.0.1",
        "secure-port": None, "tls-cert-file": None, "tls-private-key-file": None,
    },
    "kwok": {
        "kubeconfig": None, "config": None, "server-address": None, "cidr": "10.244.0.0/16",
        "manage-nodes-with-label-selector": "infercrane.dev/simulated-node=kwok",
    },
}
for flag, value in REQUIRED[name].items():
    if flag not in flags or (value is not None and flags[flag] != value):
        print(f"{name}: bad or missing --{flag} (got {flags.get(flag)!r})", flush=True)
        sys.exit(2)
    if flag.endswith("-file") or flag in ("kubeconfig", "config"):
        assert os.path.isfile(flags[flag]), flags[flag]
if name == "kwok" and not os.environ["HOME"].endswith("/kwok-home"):
    print(f"kwok: HOME is {os.environ['HOME']}, not the workdir's", flush=True)
    sys.exit(2)

behaviour = os.environ.get("FAKE_" + name.upper().replace("-", "_"), "ok")
if behaviour == "fail":
    print(f"{name}: simulated fatal error", flush=True)
    sys.exit(3)
if behaviour == "hang":
    # Never ready, with a child in the group to prove the whole group is killed.
    child = subprocess.Popen(["sleep", "300"])
    print(f"child {child.pid}", flush=True)
    time.sleep(300)

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"health":"true"}' if name == "etcd" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

if name == "etcd":
    port = int(flags["listen-client-urls"].rsplit(":", 1)[1])
elif name == "kwok":
    port = int(flags["server-address"].rsplit(":", 1)[1])
else:
    port = int(flags["secure-port"])
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
if name not in ("etcd", "kwok"):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(flags["tls-cert-file"], flags["tls-private-key-file"])
    if "client-ca-file" in flags:
        ctx.load_verify_locations(flags["client-ca-file"])
        ctx.verify_mode = ssl.CERT_REQUIRED
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
print(f"{name} serving on {port}", flush=True)
server.serve_forever()
"""


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{FAKE_DAEMON}")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(TOOLS_BIN_ENV, str(bin_dir))
    return bin_dir


@pytest.fixture
def base_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "clusters"
    yield path
    # Nothing may be left behind by any test, pass or fail.
    leftovers = list(path.glob("infercrane-localcluster-*")) if path.exists() else []
    assert leftovers == []


def test_start_and_stop_with_fake_daemons(fake_bin: Path, base_dir: Path) -> None:
    plane = LocalControlPlane(base_dir=base_dir, startup_timeout=20)
    with plane:
        assert [p.name for p in plane.processes] == [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
        ]
        assert all(p.is_running() for p in plane.processes)
        assert plane.server.startswith("https://127.0.0.1:")
        assert plane.cold_start_seconds > 0
        assert plane.workdir.parent == base_dir
        assert plane.admin_context == "infercrane-admin"
        assert plane.provider_context == "infercrane-provider"
        config = yaml.safe_load(plane.kubeconfig_path.read_text())
        assert {c["name"] for c in config["contexts"]} == {
            plane.admin_context,
            plane.provider_context,
        }
        assert config["clusters"][0]["cluster"]["server"] == plane.server
        assert "current-context" not in config
        kcm_config = yaml.safe_load(
            (plane.workdir / "kube-controller-manager.kubeconfig").read_text()
        )
        assert kcm_config["current-context"] == "system:kube-controller-manager"
        pgids = [p.pgid for p in plane.processes]
        workdir = plane.workdir
    assert all(group_members(pgid) == [] for pgid in pgids)
    assert not workdir.exists()
    assert plane.processes == ()
    plane.stop()  # idempotent


def test_scheduling_adds_scheduler_and_kwok(fake_bin: Path, base_dir: Path) -> None:
    with LocalControlPlane(base_dir=base_dir, startup_timeout=20, scheduling=True) as plane:
        assert plane.scheduling
        assert [p.name for p in plane.processes] == [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        ]
        assert all(p.is_running() for p in plane.processes)
        apiserver_log = (plane.workdir / "logs" / "kube-apiserver.log").read_text()
        assert "--enable-admission-plugins=ExtendedResourceToleration" in apiserver_log
        assert "--service-cluster-ip-range=10.96.0.0/12" in apiserver_log
        for daemon, user in (
            ("kube-scheduler", "system:kube-scheduler"),
            ("kwok", "infercrane-kwok"),
        ):
            config = yaml.safe_load((plane.workdir / f"{daemon}.kubeconfig").read_text())
            assert config["current-context"] == user
        pgids = [p.pgid for p in plane.processes]
    assert all(group_members(pgid) == [] for pgid in pgids)


def test_scheduling_is_off_by_default_and_pools_imply_it() -> None:
    from infercrane_dev.localcluster.nodepools import NodePool

    assert LocalControlPlane().scheduling is False
    assert LocalControlPlane(node_pools=[NodePool("NVIDIA-L4", 1, 1)]).scheduling is True


def test_node_pool_needs_scheduling(fake_bin: Path, base_dir: Path) -> None:
    from infercrane_dev.localcluster.nodepools import NodePool

    with (
        LocalControlPlane(base_dir=base_dir, startup_timeout=20) as plane,
        pytest.raises(ControlPlaneError, match="scheduling=True"),
    ):
        plane.add_node_pool(NodePool("NVIDIA-L4", 1, 1))


@pytest.mark.parametrize("failing", ["kube-scheduler", "kwok"])
def test_rollback_when_a_scheduling_component_crashes(
    fake_bin: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    monkeypatch.setenv("FAKE_" + failing.upper().replace("-", "_"), "fail")
    plane = LocalControlPlane(base_dir=base_dir, startup_timeout=20, scheduling=True)
    started: list[int] = []
    real_spawn = plane._spawn

    def spy(name: str, argv: list[str], env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        process = real_spawn(name, argv, env)
        started.append(process.pgid)
        return process

    monkeypatch.setattr(plane, "_spawn", spy)
    with pytest.raises(ProcessStartError, match=f"{failing} exited \\(code 3\\)"):
        plane.start()
    assert len(started) == 5
    assert all(group_members(pgid) == [] for pgid in started)
    assert plane.processes == ()
    assert not list(base_dir.iterdir())


def test_scheduling_without_its_binaries_creates_nothing(fake_bin: Path, base_dir: Path) -> None:
    (fake_bin / "kwok").unlink()
    with pytest.raises(BinaryNotFoundError, match="'kwok' not found"):
        LocalControlPlane(base_dir=base_dir, scheduling=True).start()
    assert not base_dir.exists()
    # Without scheduling kwok is not needed.
    with LocalControlPlane(base_dir=base_dir, startup_timeout=20) as plane:
        assert len(plane.processes) == 3


def test_properties_before_start_raise() -> None:
    plane = LocalControlPlane()
    with pytest.raises(ControlPlaneError, match="after start"):
        _ = plane.server
    assert plane.admin_context == "infercrane-admin"


@pytest.mark.parametrize("failing", ["kube-apiserver", "kube-controller-manager"])
def test_rollback_when_a_later_component_crashes(
    fake_bin: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    monkeypatch.setenv("FAKE_" + failing.upper().replace("-", "_"), "fail")
    plane = LocalControlPlane(base_dir=base_dir, startup_timeout=20)
    started: list[int] = []
    real_spawn = plane._spawn

    def spy(name: str, argv: list[str], env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        process = real_spawn(name, argv, env)
        started.append(process.pgid)
        return process

    monkeypatch.setattr(plane, "_spawn", spy)
    with pytest.raises(ProcessStartError) as info:
        plane.start()
    assert f"{failing} exited (code 3)" in str(info.value)
    assert "simulated fatal error" in str(info.value)
    assert len(started) == (2 if failing == "kube-apiserver" else 3)
    assert all(group_members(pgid) == [] for pgid in started)
    assert plane.processes == ()
    assert not list(base_dir.iterdir())


def test_rollback_when_a_component_never_becomes_ready(
    fake_bin: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_KUBE_APISERVER", "hang")
    plane = LocalControlPlane(base_dir=base_dir, startup_timeout=1.5)
    seen: list[tuple[int, Path]] = []
    real_spawn = plane._spawn

    def spy(name: str, argv: list[str], env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
        process = real_spawn(name, argv, env)
        seen.append((process.pgid, process.log_path))
        return process

    monkeypatch.setattr(plane, "_spawn", spy)
    with pytest.raises(ProcessStartError, match="kube-apiserver not ready after"):
        plane.start()
    assert all(group_members(pgid) == [] for pgid, _ in seen)
    assert not list(base_dir.iterdir())


def test_missing_binaries_create_nothing(
    tmp_path: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOOLS_BIN_ENV, str(tmp_path / "nothing-here"))
    with pytest.raises(BinaryNotFoundError, match=TOOLS_BIN_ENV):
        LocalControlPlane(base_dir=base_dir).start()
    assert not base_dir.exists()


def test_explicit_binaries_bypass_discovery(
    fake_bin: Path, base_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOOLS_BIN_ENV, "/nonexistent")
    binaries = ControlPlaneBinaries(
        etcd=fake_bin / "etcd",
        kube_apiserver=fake_bin / "kube-apiserver",
        kube_controller_manager=fake_bin / "kube-controller-manager",
    )
    with LocalControlPlane(binaries=binaries, base_dir=base_dir, startup_timeout=20) as plane:
        assert len(plane.processes) == 3


def test_cannot_start_twice(fake_bin: Path, base_dir: Path) -> None:
    with (
        LocalControlPlane(base_dir=base_dir, startup_timeout=20) as plane,
        pytest.raises(ControlPlaneError, match="already started"),
    ):
        plane.start()


# -- CLI ------------------------------------------------------------------------


def test_cli_bad_usage_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["sideways"]) == 2
    assert main(["up", "--bogus"]) == 2
    assert main(["up", "--timeout", "0"]) == 2
    assert main(["--help"]) == 0
    capsys.readouterr()


def test_cli_down_without_cluster_is_ok_twice(tmp_path: Path) -> None:
    assert main(["down", "--dir", str(tmp_path / "state")]) == 0
    assert main(["down", "--dir", str(tmp_path / "state")]) == 0


def test_cli_up_down_round_trip(
    fake_bin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = tmp_path / "state"
    assert main(["up", "--dir", str(state_dir), "--timeout", "20"]) == 0
    out = capsys.readouterr().out
    state = load_state(state_dir)
    assert state is not None
    assert f"kubeconfig: {state.kubeconfig_path}" in out
    assert "infercrane-admin" in out and "infercrane-provider" in out
    assert state.kubeconfig_path.is_file()
    assert state.workdir.parent == state_dir
    assert [p.name for p in state.processes] == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
    ]
    assert state.any_running()
    recorded = json.loads((state_dir / STATE_FILE).read_text())
    assert all("pgid" in p and "start_ticks" in p for p in recorded["processes"])

    # A second `up` must refuse rather than start a second cluster.
    assert main(["up", "--dir", str(state_dir)]) == 1
    assert "already up" in capsys.readouterr().err

    assert main(["down", "--dir", str(state_dir)]) == 0
    assert all(group_members(p.pgid) == [] for p in state.processes)
    assert not state_dir.exists()
    assert main(["down", "--dir", str(state_dir)]) == 0


def test_cli_up_with_scheduling_records_it(
    fake_bin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = tmp_path / "state"
    assert main(["up", "--dir", str(state_dir), "--timeout", "20", "--scheduling"]) == 0
    assert "scheduling: kube-scheduler + kwok" in capsys.readouterr().out
    state = load_state(state_dir)
    assert state is not None
    assert (state.scheduling, state.gpu_product_label) == (True, "nvidia.com/gpu.product")
    assert [p.name for p in state.processes][-2:] == ["kube-scheduler", "kwok"]
    assert main(["down", "--dir", str(state_dir)]) == 0
    assert all(group_members(p.pgid) == [] for p in state.processes)


def test_cli_up_failure_exits_1_and_cleans_up(
    fake_bin: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("FAKE_KUBE_CONTROLLER_MANAGER", "fail")
    state_dir = tmp_path / "state"
    assert main(["up", "--dir", str(state_dir), "--timeout", "20"]) == 1
    assert "simulated fatal error" in capsys.readouterr().err
    assert not state_dir.exists()


def test_cli_up_replaces_a_dead_cluster_record(
    fake_bin: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = tmp_path / "state"
    assert main(["up", "--dir", str(state_dir), "--timeout", "20"]) == 0
    first = load_state(state_dir)
    assert first is not None
    # Simulate the daemons dying on their own (e.g. a reboot).
    from infercrane_dev.localcluster.processes import stop_process

    for process in first.processes:
        stop_process(process, grace=2)
    assert main(["up", "--dir", str(state_dir), "--timeout", "20"]) == 0
    second = load_state(state_dir)
    assert second is not None and second.workdir != first.workdir
    assert not first.workdir.exists()
    assert main(["down", "--dir", str(state_dir)]) == 0
    capsys.readouterr()


def test_cli_corrupt_state_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    (state_dir / STATE_FILE).write_text("{not json")
    assert main(["down", "--dir", str(state_dir)]) == 1
    assert main(["up", "--dir", str(state_dir)]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_forgotten_stop_is_done_at_interpreter_exit(fake_bin: Path, base_dir: Path) -> None:
    script = (
        "import json, pathlib, sys\n"
        "from infercrane_dev.localcluster import LocalControlPlane\n"
        "plane = LocalControlPlane(base_dir=pathlib.Path(sys.argv[1]), startup_timeout=20)\n"
        "plane.start()\n"
        "print(json.dumps([p.pgid for p in plane.processes]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(base_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=repo_root(),
        check=True,
    )
    pgids = json.loads(done.stdout)
    assert len(pgids) == 3
    assert all(group_members(pgid) == [] for pgid in pgids)
    assert list(base_dir.iterdir()) == []


def test_state_recorded_before_scheduling_existed_still_loads(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    old = {
        "version": 1,
        "workdir": str(tmp_path / "w"),
        "kubeconfig_path": str(tmp_path / "w" / "kubeconfig"),
        "server": "https://127.0.0.1:6443",
        "admin_context": "infercrane-admin",
        "provider_context": "infercrane-provider",
        "cold_start_seconds": 4.2,
        "processes": [],
    }
    (state_dir / STATE_FILE).write_text(json.dumps(old))
    state = load_state(state_dir)
    assert state is not None
    assert (state.scheduling, state.gpu_product_label) == (False, "nvidia.com/gpu.product")
    assert state.to_json() == old | {
        "scheduling": False,
        "gpu_product_label": "nvidia.com/gpu.product",
        "real_node": None,
    }
