"""The Python program alone: validation, rendering, and the program run under Pulumi's mocks.

This separates what the program costs per intent (validating, rendering, registering the
components and their objects) from what the CLI, the provider plugin and the API server add in
a real run. Each size runs in a fresh interpreter (``python -m benchmarks.mocked N`` prints one
JSON line), so its peak memory is its own and no Pulumi runtime state carries over between
sizes. The program runs through the unit tests' harness (``run_program``), which imports no
pytest; its recording of each registration costs a few percent at most.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import scenario
from infercrane_pulumi.objects import manifests, workloads
from tests.unit.pulumi_harness import run_program


@dataclass(frozen=True)
class ProgramSample:
    validate_s: float  # parse_stack_config of N intents
    render_s: float  # stack_objects + YAML, what `render` prints
    evaluate_s: float  # the whole program under mocks, preflight left out
    evaluate_cpu_s: float  # its CPU time: steadier than wall time on a busy machine
    registrations: int
    peak_rss_mib: float


def _peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def evaluate(n: int) -> ProgramSample:
    settings = scenario.settings("bench", "bench")
    desired = scenario.intents(n)
    kubernetes = settings.model_dump(mode="json", by_alias=True, exclude_none=True)
    replicas = [intent.model_dump(mode="json", by_alias=True) for intent in desired]
    began = time.perf_counter()
    config = scenario.stack_config(settings, desired)
    validated = time.perf_counter()
    manifests.to_yaml(workloads.stack_objects(config))
    rendered, cpu = time.perf_counter(), time.process_time()
    run = run_program(kubernetes, replicas, preflight=lambda config: None)
    evaluated, cpu = time.perf_counter(), time.process_time() - cpu
    if run.error is not None:
        raise run.error
    return ProgramSample(
        validate_s=validated - began,
        render_s=rendered - validated,
        evaluate_s=evaluated - rendered,
        evaluate_cpu_s=cpu,
        registrations=len(run.registrations),
        peak_rss_mib=_peak_rss_mib(),
    )


def measure(n: int) -> ProgramSample:
    """One sample at N, in a fresh interpreter."""
    answer = subprocess.run(
        [sys.executable, "-m", "benchmarks.mocked", str(n)],
        check=False,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    if answer.returncode != 0:
        raise RuntimeError(f"program under mocks, N={n}, failed:\n{answer.stderr[-3000:]}")
    return ProgramSample(**json.loads(answer.stdout.splitlines()[-1]))


if __name__ == "__main__":
    print(json.dumps(dataclasses.asdict(evaluate(int(sys.argv[1])))))
