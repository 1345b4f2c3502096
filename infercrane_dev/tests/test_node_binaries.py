"""The sandbox's pause process and the device plugin's command line, as the node runs them:
both end with exit 0 on the signals a kubelet or runtime sends, and pause, as PID 1 of a PID
namespace, reaps the orphans reparented to it. The plugin's gRPC side is
tested in Go against a fake kubelet (``hack/tools/build.sh --test``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from infercrane_dev.images.build import binaries_version

EXIT_TIMEOUT = 5.0


def signalled(
    argv: list[str], sig: signal.Signals, *, ready: str, on_stderr: bool = False
) -> tuple[int, str, str]:
    """Start argv, wait for its first line (both programs write it once their signal handling
    is set up) and check it is ``ready``, send sig; returns code, stdout, stderr."""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        stream = process.stderr if on_stderr else process.stdout
        first = stream.readline()
        process.send_signal(sig)
        try:
            code = process.wait(timeout=EXIT_TIMEOUT)
        finally:
            process.kill()
        assert first == ready + "\n"
        return code, process.stdout.read(), process.stderr.read()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_pause_blocks_until_told_to_stop(node_bin_dir: Path, sig: signal.Signals) -> None:
    warning = "infercrane-pause: warning: not PID 1, so orphans are not reparented to it"
    assert signalled(
        [str(node_bin_dir / "infercrane-pause")], sig, ready=warning, on_stderr=True
    ) == (0, "", "")


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def poll(probe: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + EXIT_TIMEOUT
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")),
    reason="needs root and util-linux's unshare and nsenter for a PID namespace",
)
def test_pause_as_pid_1_reaps_the_orphans_reparented_to_it(node_bin_dir: Path) -> None:
    pause = node_bin_dir / "infercrane-pause"
    argv = ["unshare", "--pid", "--fork", "--kill-child", str(pause)]
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as unshare:
        try:
            poll(lambda: len(children(unshare.pid)) == 1, "unshare's child")
            [init] = children(unshare.pid)
            poll(lambda: Path(f"/proc/{init}/exe").resolve() == pause.resolve(), "pause as PID 1")
            # sh exits at once, so its background child is reparented to the namespace's PID 1.
            orphan = ["nsenter", "--target", str(init), "--pid", "--", "sh", "-c", "sleep 0.1 &"]
            subprocess.run(orphan, check=True, timeout=EXIT_TIMEOUT)
            poll(lambda: children(init) == [], "pause to reap the orphan (a zombie stays a child)")
            os.kill(init, signal.SIGTERM)  # unshare ignores it, and exits with pause's code
            code = unshare.wait(timeout=EXIT_TIMEOUT)
        finally:
            unshare.kill()
        assert (code, unshare.stderr.read() if unshare.stderr else None) == (0, "")


def test_pause_says_its_version(node_bin_dir: Path) -> None:
    assert binaries_version(node_bin_dir).startswith("v")


def test_the_device_plugin_refuses_a_bad_command_line_in_one_line(node_bin_dir: Path) -> None:
    plugin = str(node_bin_dir / "infercrane-gpu-device-plugin")
    done = subprocess.run(
        [plugin, "--count", "0", "--plugin-dir", "relative"],
        check=False,
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "infercrane-gpu-device-plugin: error: --count must be at least 1, got 0; "
        '--plugin-dir must be an absolute path, got "relative"\n',
    )


def test_the_device_plugin_waits_for_a_kubelet_and_stops_on_sigterm(
    node_bin_dir: Path, tmp_path: Path
) -> None:
    argv = [str(node_bin_dir / "infercrane-gpu-device-plugin"), "--count", "2",
            "--plugin-dir", str(tmp_path), "--product", "NVIDIA-L40S"]  # fmt: skip
    first = (
        "infercrane-gpu-device-plugin: advertising 2 fake NVIDIA-L40S GPU(s) as nvidia.com/gpu "
        f"on {tmp_path}/infercrane-gpu.sock"
    )
    code, out, err = signalled(argv, signal.SIGTERM, ready=first)
    assert (code, err, out.splitlines()) == (
        0,
        "",
        [
            f"infercrane-gpu-device-plugin: waiting for {tmp_path}/kubelet.sock",
            f"infercrane-gpu-device-plugin: stopping: removing {tmp_path}/infercrane-gpu.sock",
        ],
    )
    assert list(tmp_path.iterdir()) == []
