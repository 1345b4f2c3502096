"""The Pulumi project a control plane's workspace holds: its settings, no program file.

``pulumi up`` users run the repository's ``Pulumi.yaml`` and ``__main__.py``; every driver
(the control plane, the command line, the tests) gets the project's settings written into a
directory of its own, with stack files under ``stacks/``, and serves the program from its own
process (``programhost``), so the CLI never starts a language host there. Unlike the
repository's, this project forces no refresh: the Automation API can ask for a refresh but
cannot decline one the project forces, and the run path refreshes exactly when the cluster
drifted (or when asked to).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from infercrane_pulumi.config.files import STACK_CONFIG_DIR
from infercrane_pulumi.objects import naming

PROJECT_NAME = naming.PROJECT_NAME


def project_settings() -> dict[str, object]:
    return {
        "name": PROJECT_NAME,
        "description": "InferCrane's Kubernetes provider (control-plane workspace)",
        "runtime": "python",
        "stackConfigDir": STACK_CONFIG_DIR,
    }


def write_project(directory: Path) -> Path:
    """Write (or rewrite, atomically) the project file into ``directory``; returns it."""
    (directory / STACK_CONFIG_DIR).mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(project_settings(), sort_keys=False)
    target = directory / "Pulumi.yaml"
    if target.exists() and target.read_text() == text:
        return directory
    partial = directory / f".Pulumi.yaml.{os.getpid()}"
    partial.write_text(text)
    partial.replace(target)
    return directory
