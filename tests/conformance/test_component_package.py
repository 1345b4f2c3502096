"""``Replica`` from a Pulumi YAML program, through the component package (``packages:`` in its
``Pulumi.yaml``), run by a person's ``pulumi`` on the real engine against the suite's API
server: up, a change, a removed component, a look-alike, destroy. The same guarantees as the
project's own program: a strict dry-run and the ownership check before anything is registered,
applies never forced, a removed component's objects deleted each by its uid, a look-alike never
adopted nor deleted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from infercrane_pulumi.objects import kinds, naming
from infercrane_pulumi.package import PLUGIN_DIR
from tests.conformance.harness import ENGINE_BINARIES, Harness, replica, require_toolchain
from tests.conformance.test_exact_deletion import KINDS, LOOK_ALIKE, look_alike, uid
from tests.runguard import by_a_person

# pythons: also on the wheel's Pythons, beside the lowest supported SDK (the provider process
# imports the installed wheel: its script's directory, not the checkout, is on its path).
pytestmark = [pytest.mark.conformance, pytest.mark.pythons, pytest.mark.timeout(300)]

STACK = "dev"


class YamlProgram:
    """A person's Pulumi YAML project using the package, and their ``pulumi``."""

    def __init__(self, harness: Harness, directory: Path) -> None:
        bin_dir = require_toolchain((*ENGINE_BINARIES, "pulumi-language-yaml"))
        self.harness, self.directory = harness, directory
        directory.mkdir()
        # The plugin runs on python3 of the environment infercrane-pulumi is installed in.
        path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
        self.env = harness.process_env() | harness.env.variables() | {"PATH": path}

    def write(self, replicas: dict[str, dict[str, Any]]) -> None:
        """The program: one ``Replica`` per name, with this namespace's settings."""
        settings = self.harness.kubernetes(kubeconfig=str(self.harness.provider.kubeconfig))
        program = {
            "name": "yaml-replicas",
            "runtime": "yaml",
            "packages": {"infercrane": str(PLUGIN_DIR)},
            "resources": {
                name: {
                    "type": naming.REPLICA_TYPE,
                    "properties": {"kubernetes": dict(settings), **fields},
                }
                for name, fields in replicas.items()
            },
            "outputs": {name: f"${{{name}.endpoint}}" for name in replicas},
        }
        (self.directory / "Pulumi.yaml").write_text(yaml.safe_dump(program))

    def pulumi(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = by_a_person(
            subprocess.run,
            ["pulumi", *command, "--stack", STACK, "--non-interactive"],
            cwd=self.directory,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        if check:
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done

    def outputs(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.pulumi("stack", "output", "--json").stdout)
        return found


def uids(harness: Harness, *keys: str) -> dict[tuple[str, str], str | None]:
    return {(kind.kind, key): uid(harness, kind, key) for kind in KINDS for key in keys}


def test_a_yaml_program_ups_changes_removes_and_destroys_replicas_by_the_ownership_rule(
    harness: Harness, admin_client: client.ApiClient, tmp_path: Path
) -> None:
    program = YamlProgram(harness, tmp_path / "yaml-replicas")
    program.write({"first": replica("pkg-a"), "second": replica("pkg-b")})
    program.pulumi("stack", "init")

    program.pulumi("up", "--yes")
    applied = uids(harness, "pkg-a", "pkg-b")
    assert None not in applied.values(), applied
    namespace = harness.namespace
    assert program.outputs() == {
        "first": f"http://{naming.object_name('pkg-a')}.{namespace}.svc:8000",
        "second": f"http://{naming.object_name('pkg-b')}.{namespace}.svc:8000",
    }
    deployment = harness.get(kinds.DEPLOYMENT, "pkg-a")
    assert deployment is not None
    labels = deployment["metadata"]["labels"]
    assert labels[naming.LABEL_STACK] == naming.stack_identity("yaml-replicas", STACK)
    managers = {entry["manager"] for entry in deployment["metadata"]["managedFields"]}
    assert "infercrane-provider-v1" in managers, managers

    # A change: the object is updated in place, the other component untouched.
    program.write({"first": replica("pkg-a", model="Qwen/Qwen3-1.7B"), "second": replica("pkg-b")})
    program.pulumi("up", "--yes")
    assert uids(harness, "pkg-a", "pkg-b") == applied
    changed = harness.get(kinds.DEPLOYMENT, "pkg-a")
    assert changed is not None
    assert "Qwen/Qwen3-1.7B" in changed["spec"]["template"]["spec"]["containers"][0]["args"]

    # A misspelt input is refused by the package's schema; nothing changes.
    program.write({"first": replica("pkg-a", modle="x"), "second": replica("pkg-b")})
    refused = program.pulumi("up", "--yes", check=False)
    assert refused.returncode != 0
    assert "modle" in refused.stdout + refused.stderr
    assert uids(harness, "pkg-a", "pkg-b") == applied

    # A removed component: exactly its objects are deleted.
    program.write({"first": replica("pkg-a", model="Qwen/Qwen3-1.7B")})
    program.pulumi("up", "--yes")
    assert uids(harness, "pkg-a", "pkg-b") == applied | {
        (kind.kind, "pkg-b"): None for kind in KINDS
    }

    # Another team's Service takes pkg-a's name (ours deleted behind the stack's back): the
    # next up refuses before registering anything; destroy deletes our Deployment and leaves it.
    service = harness.get(kinds.SERVICE, "pkg-a")
    assert service is not None
    assert harness.admin.delete(service, uid=service["metadata"]["uid"]).status < 300
    theirs = look_alike(admin_client, kinds.SERVICE, namespace, "pkg-a")
    refused = program.pulumi("up", "--yes", check=False)
    assert refused.returncode != 0
    said = refused.stdout + refused.stderr
    assert "[ownership-conflict] InferCrane refused to continue" in said, said[-3000:]
    assert "is not exactly ours" in said and "Unexpected" not in said, said[-3000:]
    assert uid(harness, kinds.SERVICE, "pkg-a") == theirs

    program.pulumi("destroy", "--yes")
    assert uid(harness, kinds.DEPLOYMENT, "pkg-a") is None
    assert uid(harness, kinds.SERVICE, "pkg-a") == theirs
    left = harness.get(kinds.SERVICE, "pkg-a")
    assert left is not None and left["metadata"]["labels"] == LOOK_ALIKE
