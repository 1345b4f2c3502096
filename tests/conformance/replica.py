"""A control-plane replica as its own process, as another host would run it.

``python -m tests.conformance.replica <spec.json>`` builds ``NamespaceStack`` objects with a
workspace and a ``PULUMI_HOME`` of its own on the shared backend the spec names (the backend's
password comes from ``PGPASSWORD``, never from the spec or the command line), then reads one
JSON call per line on stdin and answers one JSON line per call on stdout, so a test can
interleave calls with faults (a SIGKILL, a database restart). ``Replica`` is the test's side.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from infercrane_dev.localcluster.processes import kill_tree
from infercrane_pulumi import automation
from infercrane_pulumi.automation import NamespaceStack
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.errors import InferCraneError


def main(argv: Sequence[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    env = automation.PulumiEnvironment.for_backend(
        spec["backend"],
        lease_url=spec.get("lease"),
        pulumi_home=Path(spec["pulumiHome"]),
        passphrase=spec["passphrase"],
        bin_dir=Path(spec["binDir"]),
    )
    stacks: dict[str, NamespaceStack] = {}

    def stack(namespace: str) -> NamespaceStack:
        if namespace not in stacks:
            settings = KubernetesSettings.model_validate(spec["namespaces"][namespace])
            workspace = Path(spec["workspace"]) / namespace
            stacks[namespace] = NamespaceStack(settings, env, workspace)
        return stacks[namespace]

    print(json.dumps({"ready": os.getpid()}), flush=True)
    for line in sys.stdin:
        call = json.loads(line)
        started = time.monotonic()
        answer = {"call": call["op"]} | _answer(call, stack)
        print(json.dumps(answer | {"seconds": time.monotonic() - started}), flush=True)
    return 0


def _answer(call: Mapping[str, Any], stack: Any) -> dict[str, Any]:
    def intents(entries: Sequence[Mapping[str, Any]]) -> list[ReplicaIntent]:
        return [ReplicaIntent.model_validate(entry) for entry in entries]

    try:
        if call["op"] == "ensure":
            chosen = stack(call["namespace"])
            chosen.wait_seconds = call.get("wait", 0.0)
            result = chosen.ensure(intents(call["intents"]))
            return {"ok": True, "changes": {r.external_key: r.change for r in result.replicas}}
        if call["op"] == "observe":
            found = stack(call["namespace"]).observe()
            return {"ok": True, "observed": [[o.external_key, o.state] for o in found]}
        if call["op"] == "ensure_many":
            requests = {}
            for namespace, entries in call["namespaces"].items():
                chosen = stack(namespace)
                chosen.wait_seconds = call.get("wait", 0.0)
                requests[namespace] = (chosen, intents(entries))
            outcomes = automation.ensure_many(requests, parallel=call.get("parallel", 2))
            return {
                "ok": True,
                "outcomes": {
                    namespace: (
                        {"changes": {r.external_key: r.change for r in outcome.result.replicas}}
                        if outcome.result is not None
                        else {"error": outcome.error.to_record() if outcome.error else None}
                    )
                    for namespace, outcome in outcomes.items()
                },
            }
    except InferCraneError as error:
        return {"ok": False, "error": error.to_record()}
    raise ValueError(f"unknown call {call['op']!r}")


# -- the test's side --------------------------------------------------------------------------


@dataclass(frozen=True)
class SharedBackend:
    """What every replica is given: the backend (no password), its secrets as variables."""

    url: str
    variables: Mapping[str, str]  # PGPASSWORD, S3 keys: the replica's environment
    lease_url: str | None = None


class Replica:
    """One replica process, its own workspace and PULUMI_HOME under ``directory``."""

    def __init__(
        self,
        name: str,
        directory: Path,
        backend: SharedBackend,
        *,
        namespaces: Mapping[str, Mapping[str, Any]],
        plugins: Path,
        bin_dir: Path,
    ) -> None:
        self.name = name
        home = directory / name / "pulumi-home"
        # The plugin installed as on any host: a copy of the same files (hard links).
        shutil.copytree(plugins, home / "plugins", copy_function=os.link)
        spec = {
            "backend": backend.url,
            "lease": backend.lease_url,
            "pulumiHome": str(home),
            "workspace": str(directory / name / "workspace"),
            "passphrase": "conformance-only",
            "binDir": str(bin_dir),
            "namespaces": namespaces,
        }
        spec_file = directory / name / "spec.json"
        spec_file.write_text(json.dumps(spec))
        # Its runs' private directories too: a killed replica's stay in the test's directory.
        temporary = directory / name / "tmp"
        temporary.mkdir(mode=0o700)
        self.stderr = (directory / name / "stderr").open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.conformance.replica", str(spec_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env=os.environ | dict(backend.variables) | {"TMPDIR": str(temporary)},
            start_new_session=True,  # a replica is its process group, engine included
        )
        self._read()  # ready

    def send(self, op: str, **call: Any) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(json.dumps({"op": op} | call) + "\n")
        stdin.flush()

    def answer(self) -> dict[str, Any]:
        return self._read()

    def call(self, op: str, **call: Any) -> dict[str, Any]:
        self.send(op, **call)
        return self.answer()

    def kill(self) -> None:
        """SIGKILL the replica with its engine and every plugin it started, as a host dies."""
        kill_tree(self.process.pid)
        self.process.wait(timeout=30)

    def close(self) -> None:
        """End of input ends the replica; one that does not end is killed."""
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr.close()

    def _read(self) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            raise AssertionError(f"replica {self.name} exited ({self.process.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
