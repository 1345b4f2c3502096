"""The stand-in's launch contracts, one process per argv: each form's accepted argv starts a
server that reports what it parsed, and every refused argv exits 2 with one argparse-style line
on stderr before anything listens (stdout stays empty: no "listening" line is ever written).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from infercrane_dev.localcluster import free_port
from infercrane_dev.tests.standin_process import command_link, run_to_exit, running

VLLM_USAGE = "(usage: vllm serve <model_tag> [options])"
API_SERVER_USAGE = "(usage: python3 -m vllm.entrypoints.openai.api_server --model MODEL [options])"
SGLANG_USAGE = "(usage: python3 -m sglang.launch_server --model-path MODEL_PATH [options])"
PYTHON_USAGE = (
    "(usage: python3 -m vllm.entrypoints.openai.api_server | python3 -m sglang.launch_server)"
)
PORT = "{port}"  # replaced by a free port in each test

ACCEPTED = [
    pytest.param(
        [
            "vllm",
            "serve",
            "Qwen/Qwen3-8B",
            "--host",
            "127.0.0.1",
            "--port",
            PORT,
            "--revision",
            "r1",
            "--dtype",
            "auto",
            "--enforce-eager",
            "--max-model-len=4096",
            "-tp",
            "1",
            "--standin-load-seconds",
            "0",
        ],
        {
            "form": "vllm-serve",
            "model": "Qwen/Qwen3-8B",
            "served_model_name": "Qwen/Qwen3-8B",
            "revision": "r1",
            "key_configured": False,
        },
        id="vllm-serve-engine-args-passed-through",
    ),
    pytest.param(
        [
            "vllm",
            "serve",
            "--host=127.0.0.1",
            "--port=" + PORT,
            "--served-model-name",
            "qwen",
            "--api-key",
            "k",
            "Qwen/Qwen3-8B",
        ],
        {
            "form": "vllm-serve",
            "model": "Qwen/Qwen3-8B",
            "served_model_name": "qwen",
            "revision": None,
            "key_configured": True,
        },
        id="vllm-serve-model-after-flags",
    ),
    pytest.param(
        [
            "python3",
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "Qwen/Qwen3-8B",
            "--host",
            "127.0.0.1",
            "--port",
            PORT,
            "--gpu-memory-utilization",
            "0.9",
        ],
        {
            "form": "vllm-api-server",
            "model": "Qwen/Qwen3-8B",
            "served_model_name": "Qwen/Qwen3-8B",
            "revision": None,
            "key_configured": False,
        },
        id="vllm-legacy-api-server",
    ),
    pytest.param(
        [
            "python3",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "Qwen/Qwen3-8B",
            "--port",
            PORT,
            "--revision",
            "r2",
            "--tp",
            "1",
            "--trust-remote-code",
        ],
        {
            "form": "sglang",
            "model": "Qwen/Qwen3-8B",
            "served_model_name": "Qwen/Qwen3-8B",
            "revision": "r2",
            "key_configured": False,
        },
        id="sglang-on-its-default-loopback-host",
    ),
]


@pytest.mark.parametrize(("argv", "expected"), ACCEPTED)
def test_an_accepted_argv_serves_what_it_asked_for(
    node_bin_dir: Path, tmp_path: Path, argv: list[str], expected: dict[str, object]
) -> None:
    port = free_port()
    args = [a.replace(PORT, str(port)) for a in argv[1:]]
    full = [str(command_link(node_bin_dir, tmp_path, argv[0])), *args]
    with running(full, port) as standin:
        reported = standin.get("/standin").body
    assert {key: reported[key] for key in (*expected, "argv", "host", "port")} == {
        **expected,
        "argv": full,
        "host": "127.0.0.1",
        "port": port,
    }


REFUSED = [
    (["vllm"], f"vllm: error: the following arguments are required: subcommand {VLLM_USAGE}"),
    (
        ["vllm", "chat"],
        'vllm: error: argument subcommand: invalid choice: "chat" '
        f"(choose from 'serve') {VLLM_USAGE}",
    ),
    (
        ["vllm", "serve"],
        f"vllm serve: error: the following arguments are required: model_tag {VLLM_USAGE}",
    ),
    (["vllm", "serve", "a", "b"], f"vllm serve: error: unrecognized arguments: b {VLLM_USAGE}"),
    # The entrypoint already says "serve": args that repeat it leave the model as an extra.
    (
        ["vllm", "serve", "serve", "Qwen/Qwen3-8B", "--port", PORT],
        f"vllm serve: error: unrecognized arguments: Qwen/Qwen3-8B {VLLM_USAGE}",
    ),
    (
        ["vllm", "serve", "m", "--port"],
        f"vllm serve: error: argument --port: expected one argument {VLLM_USAGE}",
    ),
    (
        ["vllm", "serve", "m", "--port", "http"],
        f'vllm serve: error: argument --port: invalid port value: "http" {VLLM_USAGE}',
    ),
    (
        ["vllm", "serve", "m", "--standin-load-seconds", "-1"],
        "vllm serve: error: argument --standin-load-seconds: "
        f'invalid seconds value: "-1" (0 to 3600) {VLLM_USAGE}',
    ),
    (["python3"], f"python3: error: the stand-in runs only `python3 -m <module>` {PYTHON_USAGE}"),
    (
        ["python3", "-c", "print(1)"],
        f"python3: error: the stand-in runs only `python3 -m <module>` {PYTHON_USAGE}",
    ),
    (
        ["python3", "-m", "http.server"],
        f'python3: error: no module named "http.server" in the stand-in {PYTHON_USAGE}',
    ),
    (
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "Qwen/Qwen3-8B"],
        f"api_server.py: error: the following arguments are required: --model {API_SERVER_USAGE}",
    ),
    (
        ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "extra"],
        f"api_server.py: error: unrecognized arguments: extra {API_SERVER_USAGE}",
    ),
    (
        ["python3", "-m", "sglang.launch_server", "--port", PORT],
        "launch_server.py: error: the following arguments are required: --model-path "
        f"{SGLANG_USAGE}",
    ),
    (
        ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--api-key"],
        f"launch_server.py: error: argument --api-key: expected one argument {SGLANG_USAGE}",
    ),
    (
        ["infercrane-standin", "serve", "m"],
        "infercrane-standin: error: run as vllm or python3 (argv[0] basename), "
        'not "infercrane-standin" (usage: vllm serve … | python3 -m …)',
    ),
]


@pytest.mark.parametrize(("argv", "line"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_refused_argv_exits_2_with_one_line_before_listening(
    node_bin_dir: Path, tmp_path: Path, argv: list[str], line: str
) -> None:
    port = free_port()
    args = [a.replace(PORT, str(port)) for a in argv[1:]]
    done = run_to_exit([str(command_link(node_bin_dir, tmp_path, argv[0])), *args])
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")


def test_a_bad_load_delay_in_the_environment_is_refused(node_bin_dir: Path, tmp_path: Path) -> None:
    vllm = command_link(node_bin_dir, tmp_path, "vllm")
    done = run_to_exit([str(vllm), "serve", "m"], env={"STANDIN_LOAD_SECONDS": "soon"})
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        'vllm serve: error: environment STANDIN_LOAD_SECONDS: invalid seconds value: "soon" '
        f"(0 to 3600) {VLLM_USAGE}\n",
    )
