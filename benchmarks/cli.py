"""``make bench``: measure, then write benchmarks/results/<name>.{json,md,svg}.

Each pass measures, cheapest first, the program alone under mocks, one stack at each size N
(ours then the floor, so background load hits both alike), then S stacks in parallel against
one stack of S x M. The first pass measures everything once; later passes add repetitions while
the time budget allows (``budget``). Results are rewritten after every item, so an interrupted
run keeps what it measured. ``--quick`` is for developing the benchmark itself and writes
outside Git (.infercrane/bench-quick/), so it never replaces the results of a full run.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import (
    backends,
    floor,
    machine,
    mocked,
    naive,
    ours,
    pack,
    parallel,
    report,
    rolling,
    scenario,
)
from benchmarks.budget import Budget
from benchmarks.progress import Progress
from benchmarks.results import ParallelResult, Results, SizeResult
from benchmarks.workbench import Workbench
from infercrane_dev import REPO_ROOT
from infercrane_pulumi.errors import InferCraneError

RESULTS_DIR = Path(__file__).resolve().parent / "results"
# Quick runs are for developing the benchmark: kept out of Git (.infercrane/ is ignored).
QUICK_DIR = REPO_ROOT / ".infercrane" / "bench-quick"
# Each stack run alternates between CPU and waiting (process start-up, gRPC, the API server),
# so twice the cores keeps every core busy without the runs mostly queueing for CPU.
DEFAULT_PARALLEL = 2 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class Profile:
    sizes: str
    repeat: int
    program_sizes: str
    parallel_stacks: str
    backend_sizes: str
    pack_sizes: str
    rolling_sizes: str
    name: str
    out: Path


FULL = Profile(
    "1,10,100,300,1000",
    3,
    "100,1000,5000",
    "20x50",
    "1,100,1000",
    "1,100",
    "100,1000",
    "bench",
    RESULTS_DIR,
)
QUICK = Profile("1,10", 1, "10,100", "2x5", "1,10", "1", "3", "quick", QUICK_DIR)


@dataclass(frozen=True)
class Plan:
    sizes: tuple[int, ...]
    repeat: int
    program_sizes: tuple[int, ...]
    parallel_stacks: tuple[int, int] | None
    backends: tuple[str, ...]
    backend_sizes: tuple[int, ...]
    pack_sizes: tuple[int, ...]
    rolling_sizes: tuple[int, ...]
    parallel: int
    budget_s: float
    out: Path
    name: str


def _sizes(text: str) -> tuple[int, ...]:
    sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    if any(n < 1 for n in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be positive: {text}")
    return sizes


def _grid(text: str) -> tuple[int, int]:
    stacks, _, per_stack = text.lower().partition("x")
    if not (stacks.isdigit() and per_stack.isdigit()) or min(int(stacks), int(per_stack)) < 1:
        raise argparse.ArgumentTypeError(f"expected STACKSxINTENTS, e.g. 20x50: {text}")
    return int(stacks), int(per_stack)


def parse(argv: Sequence[str]) -> Plan:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"develop the benchmark: sizes {QUICK.sizes}, {QUICK.repeat} repetition, mocked "
        f"sizes {QUICK.program_sizes}, {QUICK.parallel_stacks} stacks, written to "
        f"{QUICK_DIR}/quick.*",
    )
    parser.add_argument("--sizes", help=f"intents in one stack (default {FULL.sizes})")
    parser.add_argument("--repeat", type=int, help=f"repetitions (default {FULL.repeat})")
    parser.add_argument(
        "--program-sizes", help=f"sizes of the mocked program (default {FULL.program_sizes})"
    )
    parser.add_argument(
        "--parallel-stacks",
        help=f"STACKSxINTENTS for ensure_many (default {FULL.parallel_stacks})",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=DEFAULT_PARALLEL,
        help=f"ensure_many's parallel (default {DEFAULT_PARALLEL}: twice the cores)",
    )
    parser.add_argument("--skip-parallel", action="store_true", help="no many-stacks section")
    parser.add_argument(
        "--backends",
        default=",".join(backends.BACKENDS),
        help=f"state backends compared (default {','.join(backends.BACKENDS)}; empty: none)",
    )
    parser.add_argument(
        "--backend-sizes", help=f"intents per backend run (default {FULL.backend_sizes})"
    )
    parser.add_argument(
        "--pack-sizes", help=f"intents per policy-pack run (default {FULL.pack_sizes}; empty: none)"
    )
    parser.add_argument(
        "--rolling-sizes",
        help=f"replicas per rolling revision change (default {FULL.rolling_sizes}; empty: none)",
    )
    parser.add_argument("--skip-program", action="store_true", help="no mocked-program section")
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=80.0,
        help="trim repetitions (never sizes) to stay near this; 0 = no budget (default 80)",
    )
    parser.add_argument(
        "--out", type=Path, help=f"results directory (default {RESULTS_DIR}, or {QUICK_DIR})"
    )
    parser.add_argument("--name", help="file stem (default: bench, or quick with --quick)")
    args = parser.parse_args(argv)
    profile = QUICK if args.quick else FULL
    try:
        sizes = _sizes(args.sizes or profile.sizes)
        program_sizes = _sizes(args.program_sizes or profile.program_sizes)
        grid = _grid(args.parallel_stacks or profile.parallel_stacks)
        backend_sizes = _sizes(args.backend_sizes or profile.backend_sizes)
        pack_sizes = _sizes(profile.pack_sizes if args.pack_sizes is None else args.pack_sizes)
        rolling_sizes = _sizes(
            profile.rolling_sizes if args.rolling_sizes is None else args.rolling_sizes
        )
    except (argparse.ArgumentTypeError, ValueError) as error:
        parser.error(str(error))
    chosen = tuple(name for name in args.backends.split(",") if name)
    if unknown := set(chosen) - set(backends.BACKENDS):
        parser.error(f"--backends: unknown {', '.join(sorted(unknown))}")
    return Plan(
        sizes=sizes,
        repeat=max(1, args.repeat or profile.repeat),
        program_sizes=() if args.skip_program else program_sizes,
        parallel_stacks=None if args.skip_parallel else grid,
        backends=chosen,
        backend_sizes=backend_sizes,
        pack_sizes=pack_sizes,
        rolling_sizes=rolling_sizes,
        parallel=max(1, args.parallel),
        budget_s=args.budget_minutes * 60,
        out=args.out or profile.out,
        name=args.name or profile.name,
    )


class Run:
    """One benchmark run: the plan, what has been measured, and where it is written."""

    def __init__(self, plan: Plan, argv: Sequence[str]) -> None:
        self.plan = plan
        self.progress = Progress()
        self.budget = Budget(plan.budget_s)
        self.results = Results(
            meta={
                "command": "make bench" + (f" BENCH_ARGS='{' '.join(argv)}'" if argv else ""),
                "commit": machine.commit(),
                "started": machine.now(),
                "finished": None,
                "machine": machine.machine(),
                "load_at_start": machine.load(),
                "versions": {},
                "plan": {
                    "sizes": plan.sizes,
                    "repeat": plan.repeat,
                    "program_sizes": plan.program_sizes,
                    "parallel_stacks": plan.parallel_stacks,
                    "backends": plan.backends,
                    "backend_sizes": plan.backend_sizes,
                    "pack_sizes": plan.pack_sizes,
                    "rolling_sizes": plan.rolling_sizes,
                    "parallel": plan.parallel,
                    "budget_minutes": plan.budget_s / 60,
                },
            }
        )

    def save(self) -> None:
        self.results.meta["load_at_end"] = machine.load()
        report.write(self.results, self.plan.out, self.plan.name)

    def items(self) -> list[tuple[str, int]]:
        """What one pass measures, cheapest first: (section, N)."""
        grid = self.plan.parallel_stacks
        return [
            *(("program", n) for n in self.plan.program_sizes),
            *(("single", n) for n in self.plan.sizes),
            *([("parallel", grid[0] * grid[1])] if grid is not None else []),
            *((f"backend:{b}", n) for b in self.plan.backends for n in self.plan.backend_sizes),
            *(("pack", n) for n in self.plan.pack_sizes),
            *(("rolling", n) for n in self.plan.rolling_sizes),
        ]

    def program(self, n: int, rep: int) -> None:
        label = f"program under mocks N={n} rep {rep}"
        sample, _ = self.progress.measure(label, functools.partial(mocked.measure, n))
        self.results.program.setdefault(n, []).append(sample)

    def single(self, bench: Workbench, n: int, rep: int) -> None:
        size = self.results.single.setdefault(n, SizeResult(n, self.plan.repeat))
        usages, state_bytes = ours.lifecycle(bench, self.progress, n, rep)
        sides = {
            "ours": usages,
            "floor": floor.lifecycle(bench, self.progress, n, rep),
            "naive": naive.lifecycle(bench, self.progress, n, rep),
        }
        size.add(sides, state_bytes)

    def many(self, bench: Workbench, rep: int) -> None:
        assert self.plan.parallel_stacks is not None
        stacks, per_stack = self.plan.parallel_stacks
        total = stacks * per_stack
        if self.results.parallel is None:
            self.results.parallel = ParallelResult(stacks, per_stack, self.plan.parallel)
        result = self.results.parallel
        usages = parallel.many(
            bench, self.progress, stacks, per_stack, parallel=self.plan.parallel, rep=rep
        )
        for key, usage in usages.items():
            result.many.setdefault(key, []).append(usage)
        measured = self.results.single.get(total)
        if measured is not None:
            # The same lists: repetitions the one-stack section adds later show here too.
            result.one = {key: measured.ours[key] for key in parallel.OPERATIONS}
            result.one_source = f"the one-stack section above (ours, N={total})"
            return
        one, _ = ours.lifecycle(bench, self.progress, total, rep)
        for key in parallel.OPERATIONS:
            result.one.setdefault(key, []).append(one[key])
        result.one_source = f"a one-stack run of ours (N={total}) in this section"

    def trimmed(self, section: str, n: int, rep: int) -> None:
        self.progress.say(f"{section} N={n}: no repetition {rep}, the time budget is spent")
        note = (
            f"{rep - 1} of {self.plan.repeat} repetitions: the "
            f"{self.plan.budget_s / 60:g} min time budget ran out"
        )
        if section == "single" and not self.results.single[n].note:
            self.results.single[n].note = note
        elif section == "parallel" and self.results.parallel and not self.results.parallel.note:
            self.results.parallel.note = note

    def backend(
        self, bench: Workbench, stores: Mapping[str, backends.Store], section: str, n: int, rep: int
    ) -> None:
        name = section.removeprefix("backend:")
        samples = backends.lifecycle(bench, self.progress, name, stores[name], n=n, rep=rep)
        self.results.backends.setdefault(name, {}).setdefault(n, []).append(samples)

    def passes(self, bench: Workbench, stores: Mapping[str, backends.Store]) -> None:
        """Pass 1 measures every item once; later passes repeat what the budget allows."""
        for rep in range(1, self.plan.repeat + 1):
            for section, n in self.items():
                if rep > 1 and not self.budget.allows((section, n), self.progress.elapsed):
                    self.trimmed(section, n, rep)
                    continue
                began = time.monotonic()
                if section == "program":
                    self.program(n, rep)
                elif section == "single":
                    self.single(bench, n, rep)
                elif section == "parallel":
                    self.many(bench, rep)
                elif section == "rolling":
                    for side, usage in rolling.lifecycle(bench, self.progress, n, rep).items():
                        self.results.rolling.setdefault(n, {}).setdefault(side, []).append(usage)
                elif section == "pack":
                    for side, ops in pack.lifecycle(bench, self.progress, n, rep).items():
                        for key, usage in ops.items():
                            by_side = self.results.pack.setdefault(n, {}).setdefault(side, {})
                            by_side.setdefault(key, []).append(usage)
                else:
                    self.backend(bench, stores, section, n, rep)
                self.budget.record((section, n), time.monotonic() - began)
                self.save()

    def engine(self) -> None:
        with Workbench.open() as bench, backends.stores(bench, self.plan.backends) as stores:
            stored = {pid for store in stores.values() for pid in store.pids}
            self.progress.server_pids = (*bench.server_pids, *sorted(stored))
            self.results.meta["versions"] = machine.versions(
                bench.env.bin_dir / "pulumi" if bench.env.bin_dir else Path("pulumi"),
                bench.admin.version(),
            )
            self.progress.say(f"local control plane up in {bench.plane.cold_start_seconds:.1f} s")
            self.passes(bench, stores)


def main(argv: Sequence[str]) -> int:
    plan = parse(argv)
    run = Run(plan, argv)
    run.progress.say(f"plan: {plan}")
    status = 0
    try:
        run.engine()
    except (InferCraneError, scenario.UnexpectedResultError, TimeoutError) as error:
        run.progress.say(f"stopped: {type(error).__name__}: {error}")
        run.results.meta["stopped"] = f"{type(error).__name__}: {error}"
        status = 1
    except KeyboardInterrupt:
        run.results.meta["stopped"] = "interrupted"
        status = 130
    run.results.meta["finished"] = machine.now()
    run.save()
    run.progress.say(f"wrote {plan.out / plan.name}.{{json,md,svg}}")
    print(report.markdown(run.results, f"{plan.name}.svg"), flush=True)
    return status
