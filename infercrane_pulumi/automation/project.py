"""The Pulumi project a control plane's workspace holds: settings and the program's entry.

``pulumi up`` users run the repository's ``Pulumi.yaml`` and ``__main__.py``; every driver
(the control plane, the command line, the tests) gets the same project written into a directory
of its own, so all run ``program.main`` with stack files under ``stacks/``. Unlike the
repository's, this project forces no refresh: the Automation API can ask for a refresh but
cannot decline one the project forces, and the run path refreshes exactly when the cluster
drifted (or when asked to).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

from infercrane_pulumi import naming
from infercrane_pulumi.config_files import STACK_CONFIG_DIR

PROJECT_NAME = naming.PROJECT_NAME
ENTRY_POINT = "from infercrane_pulumi.program import main\n\nmain()\n"


def project_settings() -> dict[str, object]:
    options: dict[str, str] = {"toolchain": "pip"}
    if sys.prefix != sys.base_prefix:  # run the program with this process's virtualenv
        options["virtualenv"] = sys.prefix
    return {
        "name": PROJECT_NAME,
        "description": "InferCrane's Kubernetes provider (control-plane workspace)",
        "runtime": {"name": "python", "options": options},
        "stackConfigDir": STACK_CONFIG_DIR,
    }


def write_project(directory: Path) -> Path:
    """Write (or rewrite, atomically) the project files into ``directory``; returns it."""
    (directory / STACK_CONFIG_DIR).mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("Pulumi.yaml", yaml.safe_dump(project_settings(), sort_keys=False)),
        ("__main__.py", ENTRY_POINT),
    ):
        target = directory / name
        if target.exists() and target.read_text() == text:
            continue
        partial = directory / f".{name}.{os.getpid()}"
        partial.write_text(text)
        partial.replace(target)
    return directory
