"""The second reference: a plain pulumi-kubernetes program (``naive_program``) of the same
objects, run the way its author would, ``pulumi up`` on the command line.

Same identity, objects, backend, plugins and engine settings (checkpoints skipped, no refresh)
as ours, so the difference is what InferCrane adds or saves: validation, the namespace
snapshot and its decisions, the strict dry-run, components, results, and the fast paths.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence

import yaml

from benchmarks import scenario
from benchmarks.naive_program import CONTEXT_ENV, NAMESPACE_ENV, OBJECTS_ENV
from benchmarks.progress import Progress
from benchmarks.sampling import Usage
from benchmarks.workbench import Workbench
from infercrane_dev import REPO_ROOT
from infercrane_pulumi.config.intents import ReplicaIntent, StackConfig
from infercrane_pulumi.objects import workloads

ENTRY_POINT = "from benchmarks.naive_program import main\n\nmain()\n"
TIMEOUT_SECONDS = 3600


def lifecycle(bench: Workbench, progress: Progress, n: int, rep: int) -> dict[str, Usage]:
    """One repetition at N of every operation, as ``ours.lifecycle`` runs them."""
    settings = bench.namespace(f"bench-{n}-naive")
    stack = f"naive-{n}-r{rep}"
    project = bench.workspace(stack)
    project.mkdir(parents=True)
    runtime = {"name": "python", "options": {"toolchain": "pip", "virtualenv": sys.prefix}}
    (project / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "naive", "runtime": runtime}))
    (project / "__main__.py").write_text(ENTRY_POINT)
    objects = project / "objects.json"
    env = (
        os.environ
        | bench.env.variables()
        | {
            OBJECTS_ENV: str(objects),
            CONTEXT_ENV: settings.context,
            "KUBECONFIG": str(bench.env.kubeconfig),
            NAMESPACE_ENV: settings.namespace,
            "PYTHONPATH": str(REPO_ROOT),
        }
    )

    def pulumi(*args: str) -> None:
        done = subprocess.run(
            [str(bench.env.bin_dir / "pulumi") if bench.env.bin_dir else "pulumi", *args],
            cwd=project,
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_SECONDS,
        )
        if done.returncode != 0:
            last = (done.stdout + done.stderr).strip().splitlines()[-10:]
            raise scenario.UnexpectedResultError(f"pulumi {args[0]}: {' | '.join(last)}")

    def with_intents(intents: Sequence[ReplicaIntent], *command: str) -> Callable[[], None]:
        def step() -> None:
            config = StackConfig(kubernetes=settings, replicas=tuple(intents))
            objects.write_text(json.dumps(workloads.stack_objects(config)), encoding="utf-8")
            pulumi(*command, "--stack", stack, "--non-interactive")

        return step

    pulumi("stack", "init", stack, "--non-interactive")  # a one-time cost, not measured
    desired = scenario.intents(n)
    grown = [*desired, scenario.extra_intent(n)]
    up = ("up", "--yes", "--skip-preview")
    steps = {
        "up": with_intents(desired, *up),
        "noop": with_intents(desired, *up),
        "add1": with_intents(grown, *up),
        "preview": with_intents(scenario.with_one_changed(grown), "preview"),
        "destroy": with_intents(grown, "destroy", "--yes", "--skip-preview"),
    }
    usages: dict[str, Usage] = {}
    for key, call in steps.items():
        label = f"N={n} rep {rep} naive {scenario.OPERATIONS[key]}"
        _, usages[key] = progress.measure(label, call)
        bench.settle(settings.namespace, scenario.pods_after(key, n), progress.say)
    return usages
