"""``Replica`` from a person's Pulumi YAML program (``packages:`` in its ``Pulumi.yaml``) and
TypeScript program (``pulumi package add`` of the plugin directory, then ``npm install`` of the
SDK it generated), run by their ``pulumi`` on the real engine against the suite's API server:
up, a change, a misspelt input, a removed component, a look-alike, destroy. The same guarantees
as the project's own program: a strict dry-run and the ownership check before anything is
registered, applies never forced, a removed component's objects deleted each by its uid, a
look-alike never adopted nor deleted."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from kubernetes import client

from infercrane_dev.localcluster.processes import kill_tree
from infercrane_pulumi.objects import kinds, naming
from infercrane_pulumi.package import PLUGIN_DIR
from tests.conformance.harness import (
    ENGINE_BINARIES,
    Harness,
    replica,
    require_toolchain,
    unavailable,
)
from tests.conformance.test_exact_deletion import KINDS, LOOK_ALIKE, look_alike, uid
from tests.runguard import by_a_person

pytestmark = [pytest.mark.conformance, pytest.mark.timeout(420)]

# make test: the same kill points every run; make soak: drawn from each batch's seed.
SEED = int(os.environ.get("INFERCRANE_SOAK_SEED") or 62)

STACK = "dev"
# The TypeScript program's npm dependencies, pinned (package.json and its lock) and its compiler
# settings.
TYPESCRIPT = Path(__file__).parent / "typescript"


class Program(ABC):
    """A person's Pulumi project using the package, in one language, and their ``pulumi``."""

    project: ClassVar[str]
    host: ClassVar[str]  # the language host the toolchain builds for it

    def __init__(self, harness: Harness, directory: Path, stack: str = STACK) -> None:
        bin_dir = require_toolchain((*ENGINE_BINARIES, self.host))
        # The suite's tests share one backend: each program's stack a name of its own.
        self.harness, self.directory, self.stack = harness, directory, stack
        directory.mkdir()
        # The plugin runs on python3 of the environment infercrane-pulumi is installed in.
        path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]])
        self.env = harness.process_env() | harness.env.variables() | {"PATH": path}

    def settings(self) -> dict[str, Any]:
        return self.harness.kubernetes(kubeconfig=str(self.harness.provider.kubeconfig))

    @abstractmethod
    def write(self, replicas: dict[str, dict[str, Any]]) -> None:
        """The program: one ``Replica`` per name, with this namespace's settings, each
        exporting its endpoint under its name."""

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = by_a_person(
            subprocess.run,
            list(command),
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

    def pulumi(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("pulumi", *command, "--stack", self.stack, "--non-interactive", check=check)

    def killed_up(self, steps: int) -> bool:
        """``pulumi up``, its whole process tree SIGKILLed (as when its host dies) right after
        the engine's ``steps``-th resource step began; whether the kill landed (a run that ends
        first is not killed)."""
        log = self.directory / "events.jsonl"
        log.unlink(missing_ok=True)
        # Without its preview, whose events the CLI would write first and truncate.
        command = [
            "pulumi",
            "up",
            "--yes",
            "--skip-preview",
            "--stack",
            self.stack,
            "--non-interactive",
        ]
        process = by_a_person(
            subprocess.Popen,
            [*command, "--event-log", str(log)],
            cwd=self.directory,
            # The event log, the kill's clock, is a flag the CLI hides behind this variable.
            env=self.env | {"PULUMI_DEBUG_COMMANDS": "true"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            while process.poll() is None:
                lines = log.read_text().splitlines() if log.exists() else []
                begun = sum('"resourcePreEvent"' in line for line in lines)
                if begun >= steps:
                    kill_tree(process.pid)
                    process.wait()
                    return True
                time.sleep(0.02)
            return False
        finally:
            if process.poll() is None:
                kill_tree(process.pid)
                process.wait()

    def outputs(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.pulumi("stack", "output", "--json").stdout)
        return found


class YamlProgram(Program):
    project = "yaml-replicas"
    host = "pulumi-language-yaml"

    def write(self, replicas: dict[str, dict[str, Any]]) -> None:
        program = {
            "name": self.project,
            "runtime": "yaml",
            "packages": {"infercrane": str(PLUGIN_DIR)},
            "resources": {
                name: {
                    "type": naming.REPLICA_TYPE,
                    "properties": {"kubernetes": self.settings(), **fields},
                }
                for name, fields in replicas.items()
            },
            "outputs": {name: f"${{{name}.endpoint}}" for name in replicas},
        }
        (self.directory / "Pulumi.yaml").write_text(yaml.safe_dump(program))


class TypeScriptProgram(Program):
    """As a TypeScript user adds a package: ``pulumi package add`` generates its SDK and adds
    it to ``package.json``, ``npm install`` compiles it, the program imports it typed."""

    project = "ts-replicas"
    host = "pulumi-language-nodejs"

    def __init__(self, harness: Harness, directory: Path) -> None:
        if shutil.which("node") is None or shutil.which("npm") is None:
            unavailable("Node.js and npm are not installed: the TypeScript program cannot run")
        super().__init__(harness, directory)
        for name in ("package.json", "package-lock.json", "tsconfig.json"):
            shutil.copy(TYPESCRIPT / name, directory / name)
        (directory / "Pulumi.yaml").write_text(
            yaml.safe_dump({"name": self.project, "runtime": "nodejs"})
        )
        npm = ("--no-audit", "--no-fund", "--prefer-offline")
        self.run("npm", "ci", *npm)
        self.run("pulumi", "package", "add", str(PLUGIN_DIR), "--non-interactive")
        self.run("npm", "install", *npm)

    def write(self, replicas: dict[str, dict[str, Any]]) -> None:
        # Each intent's fields spelt out in the object literal, so that the compiler checks them.
        lines = [
            'import * as infercrane from "@pulumi/infercrane";',
            f"const kubernetes = {json.dumps(self.settings())};",
            *(
                f"export const {name} = new infercrane.kubernetes.Replica({json.dumps(name)}, "
                f"{{ kubernetes, {json.dumps(fields)[1:]}).endpoint;"
                for name, fields in replicas.items()
            ),
        ]
        (self.directory / "index.ts").write_text("\n".join(lines) + "\n")


def uids(harness: Harness, *keys: str) -> dict[tuple[str, str], str | None]:
    return {(kind.kind, key): uid(harness, kind, key) for kind in KINDS for key in keys}


@pytest.mark.parametrize(
    "language",
    [
        # Also on the wheel's Pythons, beside the lowest supported SDK (the provider process
        # imports the installed wheel: its script's directory, not the checkout, is on its path).
        pytest.param(YamlProgram, id="yaml", marks=pytest.mark.pythons),
        pytest.param(TypeScriptProgram, id="typescript"),
    ],
)
def test_a_program_ups_changes_removes_and_destroys_replicas_by_the_ownership_rule(
    harness: Harness,
    admin_client: client.ApiClient,
    tmp_path: Path,
    language: type[Program],
) -> None:
    program = language(harness, tmp_path / "program")
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
    assert labels[naming.LABEL_STACK] == naming.stack_identity(program.project, STACK)
    managers = {entry["manager"] for entry in deployment["metadata"]["managedFields"]}
    assert "infercrane-provider-v1" in managers, managers

    # A change: the object is updated in place, the other component untouched.
    program.write({"first": replica("pkg-a", model="Qwen/Qwen3-1.7B"), "second": replica("pkg-b")})
    program.pulumi("up", "--yes")
    assert uids(harness, "pkg-a", "pkg-b") == applied
    changed = harness.get(kinds.DEPLOYMENT, "pkg-a")
    assert changed is not None
    assert "Qwen/Qwen3-1.7B" in changed["spec"]["template"]["spec"]["containers"][0]["args"]

    # A misspelt input is refused before the run: by the schema (YAML), by the compiler reading
    # the SDK generated from it (TypeScript); nothing changes.
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


def test_killed_ups_leave_nothing_the_next_up_does_not_reconcile(
    harness: Harness, tmp_path: Path
) -> None:
    """The rule on a person's path: however often ``pulumi up`` of a program of components is
    killed, and wherever (drawn: the engine's resource step it had begun), the person's
    ``pulumi cancel`` and next ``up`` converge: every component's objects exist once, those a
    killed run created are taken back (their uids kept, never replaced), nothing else of ours
    is in the namespace; ``pulumi destroy`` then deletes them all."""
    drawn = random.Random(SEED)
    program = YamlProgram(harness, tmp_path / "program", stack="killed")
    # As a person runs it: the engine writes the state after every step, so a kill leaves the
    # steps it had begun as pending operations.
    del program.env["PULUMI_SKIP_CHECKPOINTS"]
    keys = ("kill-a", "kill-b")
    models = ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B")
    # Each run: the model every component is given, and the resource step it is killed at
    # (a program of two components registers 12 resources: the stack, the package's provider,
    # each component, its Kubernetes provider, its two objects and its removal resource).
    runs = [(drawn.choice(models), drawn.randint(1, 12)) for _ in range(3)]
    landed = []
    kept: dict[tuple[str, str], str] = {}
    for number, (model, steps) in enumerate(runs):
        program.write({key.replace("-", "_"): replica(key, model=model) for key in keys})
        if number == 0:
            program.pulumi("stack", "init")
        landed.append(program.killed_up(steps))
        # What the killed runs left in the cluster, as first seen: the next runs must take it
        # back as it is, never replace it.
        kept = {k: v for k, v in uids(harness, *keys).items() if v is not None} | kept
        program.pulumi("cancel", "--yes")
    print(
        f"package: 3 killed ups (seed {SEED}; model, resource step): {runs}, landed {landed}; "
        f"{len(kept)} of their objects taken back"
    )
    model = runs[-1][0]
    program.pulumi("up", "--yes")
    final = uids(harness, *keys)
    assert None not in final.values(), final
    assert final == final | kept, (final, kept)
    for key in keys:
        deployment = harness.get(kinds.DEPLOYMENT, key)
        assert deployment is not None
        assert model in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    ours = {
        (item["kind"], item["metadata"]["name"]) for kind in KINDS for item in harness.owned(kind)
    }
    assert ours == {(kind.kind, naming.object_name(key)) for kind in KINDS for key in keys}
    program.pulumi("destroy", "--yes")
    assert set(uids(harness, *keys).values()) == {None}
    program.pulumi("stack", "rm", "--yes")
