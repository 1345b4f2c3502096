"""The human side of the results: a markdown page of tables and a log-log plot.

The page says which machine, which date, which commit and which command produced it, so a number
is never read without its context; it is rewritten after every measured item, so an interrupted
run still leaves a readable page of what it measured. ``python -m benchmarks.report X.json``
rewrites X.md and X.svg from the data alone.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from benchmarks import backends, pack, rolling, scenario
from benchmarks.mocked import ProgramSample
from benchmarks.plot import PALETTE, Series, log_log_plot
from benchmarks.results import (
    Results,
    SizeResult,
    Spread,
    from_json,
    peak_rss,
    spread,
    summary,
    write_json,
)
from benchmarks.sampling import SELF_NAME, Usage

PROCESSES = ("pulumi CLI", "language host", "Python program", "pulumi-resource-kubernetes")
REFERENCE_N = 100
# Typography for the page (escaped here so the source stays ASCII).
DASH, TIMES = "\u2013", "\u00d7"


def seconds(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def shown(s: Spread, unit: Callable[[float], str] = seconds) -> str:
    if s.count == 1:
        return unit(s.median)
    return f"{unit(s.median)} ({unit(s.low)}{DASH}{unit(s.high)})"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def reference(sizes: Iterable[int]) -> int | None:
    """N=100 when measured, else the measured size nearest to it (on a log scale)."""
    candidates = sorted(sizes)
    if not candidates:
        return None
    return min(candidates, key=lambda n: abs(math.log10(n / REFERENCE_N)))


def wall(samples: Sequence[Usage]) -> Spread:
    return summary(samples)["wall_s"]


def ratio(ours: float, other: float) -> str:
    """``ours`` against ``other``: two decimals below 10, whole numbers above."""
    value = ours / other
    return f"{value:.2f}{TIMES}" if value < 10 else f"{value:.0f}{TIMES}"


def per_intent(median_s: float, n: int) -> str:
    """Milliseconds per intent, to three significant digits or so."""
    return seconds(median_s / n * 1e3)


def linearity(median_s: float, n: int, ref_median_s: float | None, ref: int | None) -> str:
    if not ref_median_s or ref is None:
        return DASH
    return f"{(median_s / n) / (ref_median_s / ref):.2f}"


def _header(results: Results) -> list[str]:
    meta = results.meta
    machine = meta["machine"]
    tools = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    return [
        "# Benchmarks: InferCrane provider on the real engine vs the API floor",
        "",
        f"Produced by `{meta['command']}` from commit `{meta['commit']}`, "
        f"{meta['started']} to {meta.get('finished') or '(still running or interrupted)'}.",
        "",
        f"Machine: {machine['cores']} cores ({machine['cpu']}), "
        f"{machine['memory_gib']:.1f} GiB memory (from /proc), {machine['kernel']}. "
        f"Load average (1 min) {meta['load_at_start']:.2f} at the start, "
        f"{meta.get('load_at_end', float('nan')):.2f} at the end: other work on the machine "
        "inflates every number here.",
        "",
        f"Tools: {tools}.",
        "",
        "How it was measured (details: `benchmarks/*.py` docstrings):",
        "",
        "- **ours**: `NamespaceStack` (the control plane's API) on the real engine against a "
        "local kube-apiserver, as the provider identity bound to the shipped Role only; N "
        "intents in deployment mode (a Deployment and a Service each). first up = `ensure` on "
        "an empty namespace; no-op up = `ensure` again (a verified no-op: no engine); add 1 "
        "intent = `ensure` of the N and one more; preview = `preview` with one intent's "
        "runtimeArgs changed; destroy = `destroy` (N+1). The stack is created before the first "
        "step.",
        "- **floor**: one persistent client (the project's `RestTransport`/`Cluster`), same "
        "identity and objects (`workloads.stack_objects`): validate + render, then per object a "
        "strict server-side dry-run and an apply (`infercrane-provider-v1`, force=false). "
        "no-op = the same again; add 1 = the new intent's two objects; preview = the dry-runs "
        "alone; destroy = one DELETE per object (Background) and waiting until all are gone.",
        "- **naive**: a plain pulumi-kubernetes program of the same objects "
        "(`benchmarks/naive_program.py`: one provider, each object registered as its kind; no "
        "component, preflight or validation), run as its author would (`pulumi up`, `preview`, "
        "`destroy` on the command line), same identity, backend, plugins, skipped checkpoints, "
        "no refresh.",
        f"- Wall seconds: median (min{DASH}max) over the repetitions. Between steps the benchmark "
        "waits, unmeasured, until the controllers have caught up (N Pods, or none).",
        "- CPU seconds: *this process* = `RUSAGE_SELF` of the benchmark process (Automation "
        "API, the program it serves and event decoding for ours; everything for the floor); "
        "*children* = the `RUSAGE_CHILDREN` delta, i.e. child processes that ended during the "
        "step with what they reaped (the pulumi CLI and provider plugin; for naive also its "
        "language host and Python program); "
        "*API server* = etcd + kube-apiserver + kube-controller-manager, from /proc.",
        "- Peak RSS: VmHWM/VmRSS of every descendant process, sampled every 100 ms from /proc; "
        "the largest per process name. The benchmark process's own peak is reset before each "
        "step (`/proc/self/clear_refs`).",
        "- Linearity: per-intent cost at N divided by per-intent cost at the reference size "
        "(1.00 = linear; 2.00 = each intent costs twice as much as at the reference).",
        "",
    ]


def _single(results: Results) -> list[str]:
    sizes = sorted(results.single)
    ref = reference(sizes)
    lines = [
        "## One stack of N intents",
        "",
        f"Wall seconds. Linearity reference: N={ref}.",
        "",
    ]

    def ref_median(side: str, key: str) -> float | None:
        if ref is None:
            return None
        samples = getattr(results.single[ref], side).get(key)
        return wall(samples).median if samples else None

    rows = []
    for n, size, key, name in _compared(results.single):
        ours, floor = wall(size.ours[key]), wall(size.floor[key])
        naive = wall(size.naive[key]) if size.naive.get(key) else None
        rows.append(
            [
                str(n),
                name,
                shown(ours),
                shown(floor),
                ratio(ours.median, floor.median),
                shown(naive) if naive else DASH,
                ratio(ours.median, naive.median) if naive else DASH,
                per_intent(ours.median, n),
                linearity(ours.median, n, ref_median("ours", key), ref),
                per_intent(floor.median, n),
                linearity(floor.median, n, ref_median("floor", key), ref),
                f"{size.repetitions}/{size.repetitions_requested}",
            ]
        )
    lines += table(
        [
            "N",
            "operation",
            "ours s",
            "floor s",
            "ours/floor",
            "naive s",
            "ours/naive",
            "ours ms/intent",
            f"ours linearity ({TIMES}N={ref})",
            "floor ms/intent",
            f"floor linearity ({TIMES}N={ref})",
            "reps",
        ],
        rows,
    )
    notes = [f"- N={n}: {results.single[n].note}" for n in sizes if results.single[n].note]
    return [*lines, "", *notes, "", *_cpu(results.single), "", *_memory(results.single), ""]


def _compared(single: dict[int, SizeResult]) -> Iterator[tuple[int, SizeResult, str, str]]:
    """(N, its results, operation key, operation name) for each operation both sides ran."""
    for n, size in sorted(single.items()):
        for key, name in scenario.OPERATIONS.items():
            if key in size.ours and key in size.floor:
                yield n, size, key, name


def _cpu(single: dict[int, SizeResult]) -> list[str]:
    rows = []
    for n, size, key, name in _compared(single):
        ours, floor = summary(size.ours[key]), summary(size.floor[key])
        client = ours["cpu_self_s"].median + ours["cpu_children_s"].median
        rows.append(
            [
                str(n),
                name,
                *(seconds(ours[k].median) for k in ("cpu_self_s", "cpu_children_s")),
                seconds(ours["cpu_server_s"].median),
                seconds(floor["cpu_self_s"].median),
                seconds(floor["cpu_server_s"].median),
                f"{client / max(floor['cpu_self_s'].median, 0.01):.0f}{TIMES}",
            ]
        )
    header = [
        "N",
        "operation",
        "ours: this process",
        "ours: children",
        "ours: API server",
        "floor: this process",
        "floor: API server",
        "client CPU ours/floor",
    ]
    return [
        "CPU seconds (medians); steadier than wall time when the machine is busy. Client CPU = "
        "this process + children (ours) against this process (floor; at least 10 ms).",
        "",
        *table(header, rows),
    ]


def _memory(single: dict[int, SizeResult]) -> list[str]:
    names = list(PROCESSES)
    for size in single.values():
        for samples in size.ours.values():
            names += [k for k in peak_rss(samples) if k not in names and k != SELF_NAME]
    rows, cpu_rows = [], []
    for n, size in sorted(single.items()):
        ours = peak_rss(s for samples in size.ours.values() for s in samples)
        floor = peak_rss(s for samples in size.floor.values() for s in samples)
        state = spread(size.state_bytes).median / 1024 if size.state_bytes else 0.0
        rows.append(
            [
                str(n),
                *(f"{ours[k]:.0f}" if k in ours else DASH for k in names),
                f"{ours.get(SELF_NAME, 0.0):.0f}",
                f"{floor.get(SELF_NAME, 0.0):.0f}",
                f"{state:.0f}",
            ]
        )
        first_up = size.ours.get("up", [])
        by_process = {
            k: spread(s.processes[k].cpu_s for s in first_up if k in s.processes)
            for k in [*names, SELF_NAME]
            if any(k in s.processes for s in first_up)
        }
        cpu_rows.append(
            [str(n), *(seconds(by_process[k].median) if k in by_process else DASH for k in names)]
        )
    return [
        "Peak RSS (MiB) per process, the largest over all operations and repetitions at that "
        "N; the Pulumi state file after the first up.",
        "",
        *table(
            ["N", *names, "this process (ours)", "this process (floor)", "state file KiB"], rows
        ),
        "",
        "CPU seconds per process during ours' first up (median; from /proc samples, so a "
        "process's last 100 ms may be missing).",
        "",
        *table(["N", *names], cpu_rows),
    ]


def _parallel(results: Results) -> list[str]:
    p = results.parallel
    if p is None:
        return []
    lines = [
        f"## {p.stacks} stacks {TIMES} {p.per_stack} intents in parallel vs one stack of "
        f"{p.stacks * p.per_stack}",
        "",
        f"`ensure_many` with parallel={p.parallel}; the one-stack numbers come from "
        f"{p.one_source}. Wall seconds.",
        "",
    ]
    rows = []
    for key in ("up", "noop"):
        if key in p.many and key in p.one:
            many, one = wall(p.many[key]), wall(p.one[key])
            rows.append(
                [
                    scenario.OPERATIONS[key],
                    shown(many),
                    shown(one),
                    f"{many.median / one.median:.2f}",
                ]
            )
    header = [
        "operation",
        f"{p.stacks} {TIMES} {p.per_stack}, parallel {p.parallel}",
        f"1 {TIMES} {p.stacks * p.per_stack}",
        "many/one",
    ]
    return [*lines, *table(header, rows), *([f"\n{p.note}"] if p.note else []), ""]


def _pack(results: Results) -> list[str]:
    if not results.pack:
        return []
    rows = []
    for n, sides in sorted(results.pack.items()):
        for key, name in pack.OPERATIONS.items():
            without, with_pack = wall(sides["without"][key]), wall(sides["with"][key])
            rows.append(
                [
                    str(n),
                    name,
                    shown(without),
                    shown(with_pack),
                    ratio(with_pack.median, without.median),
                ]
            )
    return [
        "## The policy pack",
        "",
        "`NamespaceStack` without and with InferCrane's CrossGuard pack (`policy/`, its "
        "defaults), one after the other, each on a fresh stack. Wall seconds.",
        "",
        *table(["N", "operation", "without s", "with the pack s", "with/without"], rows),
        "",
    ]


def _rolling(results: Results) -> list[str]:
    if not results.rolling:
        return []
    rows = []
    for n, sides in sorted(results.rolling.items()):
        ours, floor = wall(sides["ours"]), wall(sides["floor"])
        steps = 2 * rolling.rolled(n)
        rows.append(
            [
                str(n),
                str(steps),
                shown(ours),
                shown(floor),
                ratio(ours.median, floor.median),
                seconds(ours.median / steps),
                seconds(floor.median / steps),
                seconds(ours.median / steps * 2 * n),
            ]
        )
    return [
        "## A rolling revision change",
        "",
        "For each replica in turn: add its next-revision replica, then remove the old one (two "
        "steps; ours: one `ensure` each), for the first "
        f"{rolling.ROLLED_AT_MOST} replicas of N at most. Wall seconds for those steps, per "
        "step, and for the whole change of N replicas (2N steps) at ours' pace.",
        "",
        *table(
            [
                "N",
                "steps",
                "ours s",
                "floor s",
                "ours/floor",
                "ours s/step",
                "floor s/step",
                "ours s, 2N steps",
            ],
            rows,
        ),
        "",
    ]


def _ms(samples: Sequence[ProgramSample], pick: Callable[[ProgramSample], float]) -> str:
    return shown(spread(pick(s) * 1e3 for s in samples), lambda v: f"{v:.0f}")


def _program(results: Results) -> list[str]:
    if not results.program:
        return []
    ref = reference(results.program)
    medians = {
        n: spread(s.evaluate_s for s in samples).median for n, samples in results.program.items()
    }
    rows = []
    for n, samples in sorted(results.program.items()):
        rows.append(
            [
                str(n),
                _ms(samples, lambda s: s.validate_s),
                _ms(samples, lambda s: s.render_s),
                _ms(samples, lambda s: s.evaluate_s),
                _ms(samples, lambda s: s.evaluate_cpu_s),
                per_intent(medians[n], n),
                linearity(medians[n], n, medians.get(ref) if ref else None, ref),
                f"{max(s.peak_rss_mib for s in samples):.0f}",
                str(samples[0].registrations),
                str(len(samples)),
            ]
        )
    header = [
        "N",
        "validate ms",
        "render ms",
        "program under mocks ms",
        "its CPU ms",
        "ms/intent",
        f"linearity ({TIMES}N={ref})",
        "peak RSS MiB",
        "registrations",
        "reps",
    ]
    return [
        "## The Python program alone (Pulumi mocks, no engine, no cluster)",
        "",
        "validate = `parse_stack_config`; render = `stack_objects` + YAML (what `render` "
        "prints); program = `build_program` run under `pulumi.runtime.set_mocks`, preflight "
        f"left out. Each sample in a fresh interpreter; median (min{DASH}max).",
        "",
        *table(header, rows),
        "",
    ]


def _backends(results: Results) -> list[str]:
    """Per backend and N: median wall time and state bytes written per step."""
    if not results.backends:
        return []
    rows = []
    for backend, by_size in results.backends.items():
        for n, reps in sorted(by_size.items()):
            cells = [backend, str(n), str(len(reps))]
            for key in backends.STEPS:
                wall_s = spread(rep[key].wall_s for rep in reps)
                written = statistics.median(rep[key].bytes_written for rep in reps)
                cells += [shown(wall_s), f"{written / 1024:,.1f} KiB"]
            rows.append(cells)
    header = ["backend", "N", "reps"]
    for name in backends.STEPS.values():
        header += [f"{name} wall", f"{name} state written"]
    return [
        "## State backends",
        "",
        "The same steps through `NamespaceStack` on each backend, started for the run on "
        "loopback: a directory (`file`), PostgreSQL holding state and stack leases (`postgres`, "
        "fsync on), an S3 server over a directory with the leases in PostgreSQL (`s3`, "
        "versitygw). *State written*: the bytes of every state object the run created or "
        "changed, as the backend stores them (median).",
        "",
        *table(header, rows),
        "",
    ]


def markdown(results: Results, svg_name: str) -> str:
    lines = [
        *_header(results),
        f"![time vs N, log-log]({svg_name})",
        "",
        *_single(results),
        *_parallel(results),
        *_backends(results),
        *_rolling(results),
        *_pack(results),
        *_program(results),
    ]
    return "\n".join(lines).rstrip() + "\n"


def plot(results: Results, path: Path) -> None:
    series = []
    for index, (key, name) in enumerate(scenario.OPERATIONS.items()):
        for side, dashed in (("ours", False), ("floor", True)):
            points = [
                (float(n), wall(getattr(size, side)[key]).median)
                for n, size in sorted(results.single.items())
                if key in getattr(size, side)
            ]
            if points:
                color = PALETTE[index % len(PALETTE)]
                series.append(Series(f"{side}: {name}", points, color, dashed))
    program = [
        (float(n), spread(s.evaluate_s for s in samples).median)
        for n, samples in sorted(results.program.items())
    ]
    if program:
        series.append(Series("program under mocks", program, PALETTE[-1]))
    if series:
        machine = results.meta["machine"]
        log_log_plot(
            path,
            title="Wall time vs intents in one stack (solid: ours, dashed: floor)",
            subtitle=f"{machine['cores']} cores, {machine['memory_gib']:.0f} GiB, "
            f"{results.meta['started']}, commit {results.meta['commit']}",
            x_label="intents N",
            y_label="seconds (median)",
            series=series,
        )


def write(results: Results, directory: Path, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    write_json(results, directory / f"{name}.json")
    plot(results, directory / f"{name}.svg")
    (directory / f"{name}.md").write_text(markdown(results, f"{name}.svg"))


if __name__ == "__main__":
    # Rewrite the page and the plot of an existing run (after changing this module), e.g.
    # python -m benchmarks.report benchmarks/results/bench.json
    source = Path(sys.argv[1])
    results = from_json(json.loads(source.read_text()))
    plot(results, source.with_suffix(".svg"))
    source.with_suffix(".md").write_text(markdown(results, source.with_suffix(".svg").name))
