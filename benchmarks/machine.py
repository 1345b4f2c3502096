"""Where, when and with what a run measured: a number means nothing without its machine.

Cores and memory come from /proc (not from a configuration someone may have copied), the load
average is recorded at both ends so a run on a busy machine says so, and the commit names the
code measured (``-dirty`` when the working tree differed from it).
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PROC = Path("/proc")
REPO = Path(__file__).resolve().parents[1]


def _proc_field(file: str, name: str) -> str:
    for line in (PROC / file).read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return "unknown"


def machine() -> dict[str, Any]:
    memory_kib = int(_proc_field("meminfo", "MemTotal").split()[0])
    return {
        "cores": os.cpu_count(),
        "cpu": _proc_field("cpuinfo", "model name"),
        "memory_gib": memory_kib / 1024 / 1024,
        "kernel": f"{platform.system()} {platform.release()}",
    }


def load() -> float:
    return os.getloadavg()[0]


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _git(*args: str) -> str:
    answer = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return answer.stdout.strip()


def commit() -> str:
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return (_git("rev-parse", "--short=12", "HEAD") or "unknown") + ("-dirty" if dirty else "")


def versions(pulumi_bin: Path, api_server: str) -> dict[str, str]:
    cli = subprocess.run(
        [str(pulumi_bin), "version"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"},
    ).stdout.strip()
    return {
        "pulumi CLI": cli or "unknown",
        "pulumi SDK": metadata.version("pulumi"),
        "pulumi-kubernetes": metadata.version("pulumi-kubernetes"),
        "kube-apiserver": api_server,
        "Python": platform.python_version(),
    }
