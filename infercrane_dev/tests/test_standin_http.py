"""The stand-in's HTTP surface and lifecycle, as a kubelet and a router see them: readiness
503 until loaded, /v1/models behind the key each form reads (vLLM: --api-key or VLLM_API_KEY;
SGLang: --api-key only), /standin reporting the container it runs in, and SIGTERM: unready at
once, drained, a termination message, exit 0 well inside a 30 s grace period.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from datetime import UTC, datetime
from pathlib import Path

from infercrane_dev.images.build import binaries_version
from infercrane_dev.localcluster import free_port
from infercrane_dev.tests.standin_process import Reply, command_link, running

MODEL = "Qwen/Qwen3-8B"
UNAUTHORIZED = {
    "error": {
        "message": "a valid API key is required (Authorization: Bearer <key>)",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
}


def vllm_argv(bin_dir: Path, tmp_path: Path, port: int, *extra: str) -> list[str]:
    vllm = command_link(bin_dir, tmp_path, "vllm")
    return [str(vllm), "serve", MODEL, "--host", "127.0.0.1", "--port", str(port), *extra]


def sglang_argv(bin_dir: Path, tmp_path: Path, port: int, *extra: str) -> list[str]:
    python3 = command_link(bin_dir, tmp_path, "python3")
    return [str(python3), "-m", "sglang.launch_server", "--model-path", MODEL, "--port", str(port),
            "--standin-load-seconds", "0", *extra]  # fmt: skip


def models_list(owner: str, created: int, revision: str | None) -> dict[str, object]:
    return {
        "object": "list",
        "data": [
            {
                "id": MODEL,
                "object": "model",
                "created": created,
                "owned_by": owner,
                "root": MODEL,
                "parent": None,
                "revision": revision,
            }
        ],
    }


def started_at(standin_report: dict[str, object]) -> datetime:
    return datetime.fromisoformat(str(standin_report["started_at"]))


def test_health_is_503_until_the_load_delay_has_passed(node_bin_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    argv = vllm_argv(node_bin_dir, tmp_path, port, "--standin-load-seconds", "1")
    with running(argv, port) as standin:
        listening = time.monotonic()
        assert standin.get("/health").status == 503
        assert standin.get("/v1/models") == Reply(
            503,
            {
                "error": {
                    "message": "the model server is loading or shutting down",
                    "type": "server_error",
                    "param": None,
                    "code": "not_ready",
                }
            },
        )
        ready = standin.wait_until("/health", 200)
        assert standin.get("/v1/models").status == 200
        code, _ = standin.terminate()
        _, out, err = standin.finish()
    assert 0.5 < ready - listening < 3.0
    assert (code, err) == (0, "")
    version = binaries_version(node_bin_dir)
    assert out.splitlines() == [
        f"infercrane-standin: listening on 127.0.0.1:{port} (vllm-serve, model {MODEL}, "
        f"version {version})",
        f"infercrane-standin: loaded {MODEL}",
        "infercrane-standin: SIGTERM received; not ready, draining for 0s",
        "infercrane-standin: exiting 0",
    ]


def test_vllm_reads_its_key_from_the_environment(node_bin_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    argv = vllm_argv(
        node_bin_dir, tmp_path, port, "--revision", "r1", "--standin-load-seconds", "0"
    )
    with running(argv, port, env={"VLLM_API_KEY": "k-env"}) as standin:
        standin.wait_until("/health", 200)
        created = int(started_at(standin.get("/standin").body).timestamp())
        assert standin.get("/v1/models").body == UNAUTHORIZED
        wrong = standin.get("/v1/models", {"Authorization": "Bearer k-other"})
        right = standin.get("/v1/models", {"Authorization": "Bearer k-env"})
    assert (wrong.status, wrong.body) == (401, UNAUTHORIZED)
    assert (right.status, right.body) == (200, models_list("vllm", created, "r1"))


def test_sglang_reads_its_key_from_the_flag_only(node_bin_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    env = {"VLLM_API_KEY": "k-env"}
    with running(sglang_argv(node_bin_dir, tmp_path, port, "--api-key", "k-flag"), port, env) as s:
        s.wait_until("/health", 200)
        created = int(started_at(s.get("/standin").body).timestamp())
        refused = [s.get("/v1/models", h) for h in ({}, {"Authorization": "Bearer k-env"})]
        allowed = s.get("/v1/models", {"Authorization": "Bearer k-flag"})
    assert [(r.status, r.body) for r in refused] == [(401, UNAUTHORIZED)] * 2
    assert (allowed.status, allowed.body) == (200, models_list("sglang", created, None))

    port = free_port()
    with running(sglang_argv(node_bin_dir, tmp_path, port), port, env) as s:
        s.wait_until("/health", 200)
        open_models = s.get("/v1/models")
        assert s.get("/standin").body["key_configured"] is False
    assert open_models.status == 200


def test_standin_reports_the_container_it_runs_in(node_bin_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    argv = vllm_argv(node_bin_dir, tmp_path, port, "--api-key", "k", "--standin-load-seconds", "0")
    before = datetime.now(UTC)
    with running(argv, port, env={"NVIDIA_VISIBLE_DEVICES": "gpu-1,gpu-0"}) as standin:
        reply = standin.get("/standin")
        pid = standin.process.pid
    shm = os.statvfs("/dev/shm")
    report = reply.body
    assert before <= started_at(report) <= datetime.now(UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", report["started_at"])
    assert (reply.status, report) == (
        200,
        {
            "form": "vllm-serve",
            "argv": argv,
            "model": MODEL,
            "served_model_name": MODEL,
            "revision": None,
            "host": "127.0.0.1",
            "port": port,
            "pid": pid,
            "started_at": report["started_at"],
            "key_configured": True,
            "dev_shm_bytes": shm.f_blocks * shm.f_frsize,
            "nvidia_visible_devices": "gpu-1,gpu-0",
            "hostname": socket.gethostname(),
        },
    )
    assert "k" not in {str(v) for v in report.values()}


def test_sigterm_drains_writes_the_termination_log_and_exits_0(
    node_bin_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "termination-log"
    log.touch()  # the kubelet provides the file; the stand-in never creates one
    extra = ("--standin-load-seconds", "0", "--standin-shutdown-seconds", "2",
             "--standin-termination-log", str(log))  # fmt: skip
    with running(vllm_argv(node_bin_dir, tmp_path, port, *extra), port) as standin:
        standin.wait_until("/health", 200)
        sent = datetime.now(UTC).replace(microsecond=0)
        standin.process.send_signal(signal.SIGTERM)
        standin.wait_until("/health", 503, timeout=1.5)  # unready while still draining
        code = standin.process.wait(timeout=10)
        elapsed = (datetime.now(UTC) - sent).total_seconds()
        _, out, _ = standin.finish()
    assert code == 0
    assert 2.0 <= elapsed < 6.0
    message = log.read_text()
    assert re.fullmatch(r"received SIGTERM at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\n", message)
    assert sent <= datetime.fromisoformat(message.split(" at ")[1].strip()) <= datetime.now(UTC)
    assert out.splitlines()[-2:] == [
        "infercrane-standin: SIGTERM received; not ready, draining for 2s",
        "infercrane-standin: exiting 0",
    ]


def test_no_termination_log_is_created_where_none_was_mounted(
    node_bin_dir: Path, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "absent"
    extra = ("--standin-load-seconds", "0", "--standin-termination-log", str(log))
    with running(vllm_argv(node_bin_dir, tmp_path, port, *extra), port) as standin:
        code, seconds = standin.terminate()
    assert (code, log.exists()) == (0, False)
    assert seconds < 5.0
