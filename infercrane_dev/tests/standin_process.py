"""The stand-in as a host process, run under the names the images give it (``vllm``,
``python3``: symlinks in a temp dir, as argv[0] decides the form), and plain HTTP to it on
loopback. Every process is killed on exit from the ``running`` context, whatever happened.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

START_TIMEOUT = 10.0
EXIT_TIMEOUT = 10.0


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any  # parsed JSON, or the text when it is not JSON


def get(port: int, path: str, headers: Mapping[str, str] | None = None) -> Reply:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return _reply(response.status, response.read())
    except urllib.error.HTTPError as refused:
        with refused:
            return _reply(refused.code, refused.read())


def _reply(status: int, raw: bytes) -> Reply:
    try:
        return Reply(status, json.loads(raw))
    except ValueError:
        return Reply(status, raw.decode())


def command_link(bin_dir: Path, tmp_path: Path, name: str) -> Path:
    """``<tmp>/bin/<name>`` pointing at the stand-in binary."""
    link = tmp_path / "bin" / name
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(bin_dir / "infercrane-standin")
    return link


def run_to_exit(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        check=False,
        env=dict(env or {}),
        capture_output=True,
        text=True,
        timeout=EXIT_TIMEOUT,
    )


@dataclass
class Standin:
    process: subprocess.Popen[str]
    port: int
    _finished: tuple[int | None, str, str] | None = None

    def get(self, path: str, headers: Mapping[str, str] | None = None) -> Reply:
        return get(self.port, path, headers)

    def wait_until(self, path: str, status: int, *, timeout: float = START_TIMEOUT) -> float:
        """Poll ``path`` until it answers ``status``; returns the monotonic time it did."""
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"the stand-in exited early: {self.finish()}")
            try:
                if self.get(path).status == status:
                    return time.monotonic()
            except OSError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not answer {status} within {timeout}s")
            time.sleep(0.05)

    def terminate(self) -> tuple[int, float]:
        """SIGTERM; returns the exit code and the seconds the exit took."""
        sent = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=EXIT_TIMEOUT)
        return code, time.monotonic() - sent

    def finish(self) -> tuple[int | None, str, str]:
        """Exit code and everything the process wrote (kills it if it still runs)."""
        if self._finished is None:
            if self.process.poll() is None:
                self.process.kill()
            out, err = self.process.communicate(timeout=EXIT_TIMEOUT)
            self._finished = (self.process.returncode, out, err)
        return self._finished


@contextmanager
def running(
    argv: Sequence[str], port: int, env: Mapping[str, str] | None = None
) -> Iterator[Standin]:
    """Start the stand-in and wait until it listens (``/standin`` answers)."""
    process = subprocess.Popen(
        list(argv), env=dict(env or {}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    standin = Standin(process, port)
    try:
        standin.wait_until("/standin", 200)
        yield standin
    finally:
        standin.finish()
