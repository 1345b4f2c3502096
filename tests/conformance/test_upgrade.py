"""Upgrades keep state: a stack applied by the previous release, then run by this code.

The previous release's package is exported from git (``PREVIOUS_RELEASE``) and runs first on
the import path, through its own command line, against the same backend and cluster. Then this
code runs the same stack file (the command line's path): every key is ``same`` where both
releases render the same objects and ``update`` where the rendering changed, nothing is
replaced, created or deleted; the same intents through ``NamespaceStack`` (the control plane's
door) are then all ``same``; and no object's uid ever changes. Keep this test, moving the ref
forward at each release, for every change of URNs, types or component structure.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infercrane_pulumi.automation import project
from infercrane_pulumi.config.files import load_stack_file
from infercrane_pulumi.objects import kinds, naming, workloads
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.review.changes import by_key
from tests.conformance.harness import ROOT, Harness, replica

pytestmark = pytest.mark.conformance

# The last release on main before the run-path rework (issue 15).
PREVIOUS_RELEASE = "91e679e9678a0a9098cbce70b4a30a50538c570e"
PACKAGE = "infercrane_pulumi"
INTENTS = [
    replica("upgrade-r0", modelRevision="r1", runtimeArgs=["--max-model-len", "4096"]),
    replica(
        "upgrade-r1",
        workload={
            "image": "registry.example/lmsysorg/sglang@sha256:" + "cd" * 32,
            "command": ["python3", "-m", "sglang.launch_server", "--model-path", "${MODEL}"],
            "port": 30000,
        },
    ),
]


def previous_release(into: Path) -> Path:
    """The previous release's package, exported from this repository's history."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", PREVIOUS_RELEASE, PACKAGE],
            capture_output=True,
            check=True,
            timeout=120,
        )
    except subprocess.CalledProcessError as error:
        reason = error.stderr.decode(errors="replace").strip()
        pytest.fail(f"cannot export release {PREVIOUS_RELEASE[:12]} from git: {reason}")
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def release_project(code: Path, directory: Path) -> None:
    """The project as the release's drivers generate it into ``directory`` (the previous
    release's ran the program through the language host: it held the program file too)."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import pathlib, sys; from infercrane_pulumi.automation import project; "
            "project.write_project(pathlib.Path(sys.argv[1]))",
            str(directory),
        ],
        env=os.environ | {"PYTHONPATH": str(code)},
        cwd=directory,  # not this repository's: its package would come first on the path
        check=True,
        timeout=120,
    )


def as_release(harness: Harness, code: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The release's command line in a fresh process, as the provider identity."""
    env = harness.process_env() | harness.env.variables()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code), env.get("PYTHONPATH")) if p)
    env["INFERCRANE_TOOLS_BIN"] = str(harness.env.bin_dir)
    return subprocess.run(
        [sys.executable, "-m", PACKAGE, *args],
        env=env,
        cwd=harness.workdir,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def uids(harness: Harness) -> dict[tuple[str, str], str]:
    return {
        (kind.kind, obj["metadata"]["name"]): obj["metadata"]["uid"]
        for kind in (kinds.DEPLOYMENT, kinds.SERVICE)
        for obj in harness.owned(kind)
    }


def expected_changes(old: list[Manifest], new: list[Manifest]) -> dict[str, str]:
    """Per key: ``same`` where both releases render the very same objects, else ``update``."""
    before, after = by_key(old), by_key(new)
    assert before.keys() == after.keys()
    return {key: "same" if before[key] == after[key] else "update" for key in after}


def test_a_stack_applied_by_the_previous_release_is_kept_by_this_one(
    harness: Harness, tmp_path: Path
) -> None:
    code = previous_release(tmp_path / "previous")
    stack_file = harness.configure(INTENTS)
    release_project(code, harness.project_dir)  # which that release ran its stacks in
    stack = ["--stack", harness.stack_name, "--project-dir", str(harness.project_dir)]
    applied = as_release(harness, code, "up", *stack)
    assert applied.returncode == 0, applied.stderr[-2000:]
    before = uids(harness)
    assert len(before) == 2 * len(INTENTS)
    rendered = as_release(harness, code, "render", "--config", str(stack_file))
    assert rendered.returncode == 0, rendered.stderr[-2000:]
    config = load_stack_file(stack_file)
    # This release marks each object with its stack's identity: every object is updated once.
    identity = naming.stack_identity(project.PROJECT_NAME, harness.stack_name)
    expected = expected_changes(
        list(yaml.safe_load_all(rendered.stdout)), workloads.stack_objects(config, stack=identity)
    )

    upgraded = harness.up()
    assert {r.external_key: r.change for r in upgraded.replicas} == expected
    assert {o.change for r in upgraded.replicas for o in r.objects} <= {"same", "update"}
    # The control plane's door, from a workspace of its own, then finds nothing to do.
    again = harness.namespace_stack(tmp_path / "workspace").ensure(config.replicas)
    assert {r.external_key: r.change for r in again.replicas} == dict.fromkeys(expected, "same")
    assert uids(harness) == before
