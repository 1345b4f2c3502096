"""``python -m benchmarks.engine_profile N...``: where the Pulumi CLI spends one step of a stack
of N intents, by the engine's own Go profiler.

For each N, a stack of N intents is applied (untimed). Then two steps are measured: one intent
added (``add 1``) and one intent's runtime arguments changed (``change 1``, what a revision
change does to a Deployment). Every CLI process runs with ``pulumi --profiling`` (a wrapper
named ``pulumi`` in a bin directory of its own passes the flag first). Each writes a CPU
profile, a heap profile and an execution trace when it exits. The step's CPU samples are then
attributed, frame by frame, to what the engine was doing (:data:`BUCKETS`, the first that a
sample's stack matches), beside the step's wall time. A profile for deciding what to remove,
not a benchmark: one run per step, no floor, not written to ``benchmarks/results``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from benchmarks import scenario
from benchmarks.phases import add_one, stack_of
from benchmarks.workbench import Workbench
from infercrane_pulumi.automation import NamespaceStack

# What a CPU sample was spent on: the first bucket whose pattern some frame of its stack
# matches, in this order (the more specific first: a checkpoint written during a step counts
# as the checkpoint, not the step).
BUCKETS: tuple[tuple[str, str], ...] = (
    ("checkpoint: write", r"SnapshotManager|saveStack|SerializeDeployment|persistSnapshot"),
    (
        "checkpoint: read",
        r"DeserializeDeployment|getCheckpoint|loadCheckpoint|GetLatestConfiguration",
    ),
    ("secrets", r"secrets\.|/secrets/|crypto/|passphrase"),
    ("event log, display", r"display\.|eventlog|/events\.|ProgressDisplay|jsonEvent"),
    ("provider plugin (gRPC)", r"grpc|plugin\.|/plugin/|provider"),
    ("program (language host)", r"langhost|LanguageRuntime|resmon|RegisterResource"),
    ("steps", r"deploy\.|/deploy/|step"),
    ("garbage collector", r"runtime\.gc|gcBgMarkWorker|runtime\.scanobject|runtime\.markroot"),
    ("allocation", r"runtime\.mallocgc"),
)
OTHER = "other"


@dataclasses.dataclass(frozen=True)
class StepProfile:
    n: int
    step: str
    wall_s: float
    processes: int  # CLI processes the step started
    cpu_s: dict[str, float]  # per bucket, in BUCKETS' order, then OTHER
    frames: dict[str, dict[str, float]]  # per bucket: the matching frames' seconds


def _wrapper(real: Path, out: Path) -> Path:
    """A bin directory whose ``pulumi`` runs ``real`` with ``--profiling`` into ``out``."""
    bin_dir = out / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "pulumi"
    prefix = shlex.quote(str(out / "profiles" / "pulumi"))
    script.write_text(f'#!/bin/sh\nexec {shlex.quote(str(real))} --profiling {prefix} "$@"\n')
    script.chmod(0o755)
    (out / "profiles").mkdir()
    return bin_dir


@contextlib.contextmanager
def profiled(bench: Workbench) -> Iterator[tuple[Workbench, Path]]:
    """``bench`` with every CLI process profiled, and where the profiles go."""
    assert bench.env.bin_dir is not None
    with tempfile.TemporaryDirectory(prefix="infercrane-engine-profile-") as root:
        bin_dir = _wrapper(bench.env.bin_dir / "pulumi", Path(root))
        env = dataclasses.replace(bench.env, bin_dir=bin_dir)
        yield dataclasses.replace(bench, env=env), Path(root) / "profiles"


def _samples(cpu_profile: Path) -> list[tuple[float, list[str]]]:
    """Each sample's CPU seconds and its stack (leaf first), from ``go tool pprof -raw``."""
    raw = subprocess.run(
        ["go", "tool", "pprof", "-raw", str(cpu_profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    locations: dict[str, list[str]] = {}
    samples: list[tuple[float, list[str]]] = []
    section = ""
    for line in raw.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        if section == "Locations":
            located = re.match(r"\s*(\d+):\s+\S+\s+M=\d+\s+(\S+)", line)
            if located:
                current = located.group(1)
                locations[current] = [located.group(2)]
            elif line.strip() and locations:
                locations[list(locations)[-1]].append(line.split()[0])
        elif section == "Samples:":
            sample = re.match(r"\s*(\d+)\s+(\d+):\s+([\d ]+)", line)
            if sample:
                nanoseconds = int(sample.group(2))
                ids = sample.group(3).split()
                samples.append((nanoseconds / 1e9, ids))
    return [
        (seconds, [name for loc in ids for name in locations.get(loc, [])])
        for seconds, ids in samples
    ]


def attribute(
    samples: Sequence[tuple[float, list[str]]],
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """CPU seconds per bucket, and per bucket the seconds of each frame that matched it (the
    one nearest the leaf: the most specific function of that kind)."""
    spent: dict[str, float] = dict.fromkeys([name for name, _ in BUCKETS] + [OTHER], 0.0)
    frames: dict[str, dict[str, float]] = {name: {} for name in spent}
    for seconds, stack in samples:
        bucket, frame = OTHER, stack[0] if stack else "?"
        for name, pattern in BUCKETS:
            matched = next((f for f in stack if re.search(pattern, f)), None)
            if matched is not None:
                bucket, frame = name, matched
                break
        spent[bucket] += seconds
        frames[bucket][frame] = frames[bucket].get(frame, 0.0) + seconds
    return {name: round(seconds, 2) for name, seconds in spent.items()}, frames


def _step(profiles: Path, n: int, name: str, run: Callable[[], None]) -> StepProfile:
    before = set(profiles.iterdir())
    began = time.monotonic()
    run()
    wall = time.monotonic() - began
    made = sorted(set(profiles.iterdir()) - before)
    cpu = [p for p in made if p.suffix == ".cpu"]
    samples = [s for profile in cpu for s in _samples(profile)]
    spent, frames = attribute(samples)
    return StepProfile(n, name, round(wall, 2), len(cpu), spent, frames)


def change_one(stack: NamespaceStack, n: int) -> None:
    result = stack.ensure(
        scenario.with_one_changed([*scenario.intents(n), scenario.extra_intent(n)])
    )
    if result.summary.change < 1:
        raise scenario.UnexpectedResultError(f"N={n} change 1: {result.summary}")


def main(argv: Sequence[str] | None = None) -> int:
    sizes = [int(a) for a in (argv if argv is not None else sys.argv[1:])] or [1000]
    rows = []
    with Workbench.open() as plain, profiled(plain) as (bench, profiles):
        for n in sizes:
            with stack_of(bench, n, f"engine-profile-{n}") as stack:
                rows.append(_step(profiles, n, "add 1", functools.partial(add_one, stack, n)))
                rows.append(_step(profiles, n, "change 1", functools.partial(change_one, stack, n)))
    names = [name for name, _ in BUCKETS] + [OTHER]
    print("| N | step | wall | CLI processes | CPU: " + " | ".join(names) + " |")
    print("| --- " * (4 + len(names)) + "|")
    for row in rows:
        cells = [str(row.n), row.step, f"{row.wall_s} s", str(row.processes)]
        cells += [f"{row.cpu_s[name]} s" for name in names]
        print("| " + " | ".join(cells) + " |")
    for row in rows:
        print(f"\nN={row.n}, {row.step}: the functions each bucket's time was spent in")
        for name in names:
            most = sorted(row.frames[name].items(), key=lambda item: -item[1])[:3]
            top = ", ".join(f"{f} {t:.2f} s" for f, t in most)
            print(f"- {name}: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
