"""Everything one run measured, as data: raw samples per repetition plus their summaries.

Raw samples are kept (not only medians) so a later run can be compared repetition by
repetition; the summaries (median, min, max) are added when written so the JSON can be read
without recomputing them.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.backends import BackendSample
from benchmarks.mocked import ProgramSample
from benchmarks.sampling import ProcessUse, Usage


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    count: int


def spread(values: Iterable[float]) -> Spread:
    ordered = sorted(values)
    return Spread(statistics.median(ordered), ordered[0], ordered[-1], len(ordered))


@dataclass
class SizeResult:
    """One stack of N intents: samples per operation, ours, the floor and the naive program."""

    n: int
    repetitions_requested: int
    ours: dict[str, list[Usage]] = field(default_factory=dict)
    floor: dict[str, list[Usage]] = field(default_factory=dict)
    naive: dict[str, list[Usage]] = field(default_factory=dict)
    state_bytes: list[int] = field(default_factory=list)
    note: str = ""  # why fewer repetitions ran than requested

    @property
    def repetitions(self) -> int:
        return len(self.state_bytes)

    def add(
        self,
        sides: dict[str, dict[str, Usage]],
        state_bytes: int,
    ) -> None:
        """One repetition: each side's (ours, floor, naive) usage per operation."""
        for side, usages in sides.items():
            for key, usage in usages.items():
                getattr(self, side).setdefault(key, []).append(usage)
        self.state_bytes.append(state_bytes)


@dataclass
class ParallelResult:
    """S stacks x M intents through ensure_many vs one stack of S x M intents."""

    stacks: int
    per_stack: int
    parallel: int
    many: dict[str, list[Usage]] = field(default_factory=dict)
    one: dict[str, list[Usage]] = field(default_factory=dict)
    one_source: str = ""
    note: str = ""


@dataclass
class Results:
    meta: dict[str, Any]
    program: dict[int, list[ProgramSample]] = field(default_factory=dict)
    single: dict[int, SizeResult] = field(default_factory=dict)
    parallel: ParallelResult | None = None
    # backend -> N -> one sample per repetition, per step
    backends: dict[str, dict[int, list[dict[str, BackendSample]]]] = field(default_factory=dict)
    # N -> without/with the policy pack -> operation -> one sample per repetition
    pack: dict[int, dict[str, dict[str, list[Usage]]]] = field(default_factory=dict)
    # N -> ours/floor -> one sample (the whole rolling change) per repetition
    rolling: dict[int, dict[str, list[Usage]]] = field(default_factory=dict)


def summary(samples: Sequence[Usage]) -> dict[str, Spread]:
    return {
        name: spread(getattr(sample, name) for sample in samples)
        for name in ("wall_s", "cpu_self_s", "cpu_children_s", "cpu_server_s")
    }


def peak_rss(samples: Iterable[Usage]) -> dict[str, float]:
    """Largest peak RSS (MiB) per process name over the given steps."""
    peaks: dict[str, float] = {}
    for sample in samples:
        for name, use in sample.processes.items():
            peaks[name] = max(peaks.get(name, 0.0), use.peak_rss_mib)
    return peaks


def _with_summaries(by_operation: dict[str, list[Usage]]) -> dict[str, Any]:
    return {
        key: {
            "summary": {k: dataclasses.asdict(v) for k, v in summary(samples).items()},
            "samples": [dataclasses.asdict(sample) for sample in samples],
        }
        for key, samples in by_operation.items()
    }


def to_json(results: Results) -> dict[str, Any]:
    single = {
        str(n): {
            "n": size.n,
            "repetitions": size.repetitions,
            "repetitions_requested": size.repetitions_requested,
            "note": size.note,
            "state_bytes_after_first_up": size.state_bytes,
            "ours": _with_summaries(size.ours),
            "floor": _with_summaries(size.floor),
            "naive": _with_summaries(size.naive),
        }
        for n, size in results.single.items()
    }
    parallel = None
    if results.parallel is not None:
        p = results.parallel
        parallel = {
            "stacks": p.stacks,
            "per_stack": p.per_stack,
            "parallel": p.parallel,
            "one_source": p.one_source,
            "note": p.note,
            "many": _with_summaries(p.many),
            "one": _with_summaries(p.one),
        }
    program = {
        str(n): [dataclasses.asdict(sample) for sample in samples]
        for n, samples in results.program.items()
    }
    backends = {
        backend: {
            str(n): [{key: dataclasses.asdict(v) for key, v in rep.items()} for rep in reps]
            for n, reps in by_size.items()
        }
        for backend, by_size in results.backends.items()
    }
    return {
        "meta": results.meta,
        "program": program,
        "single": single,
        "parallel": parallel,
        "backends": backends,
        "pack": {
            str(n): {side: _with_summaries(ops) for side, ops in sides.items()}
            for n, sides in results.pack.items()
        },
        "rolling": {str(n): _with_summaries(sides) for n, sides in results.rolling.items()},
    }


def _usage(raw: dict[str, Any]) -> Usage:
    processes = {name: ProcessUse(**use) for name, use in raw.pop("processes").items()}
    return Usage(**raw, processes=processes)


def _samples(by_operation: dict[str, Any]) -> dict[str, list[Usage]]:
    return {key: [_usage(s) for s in value["samples"]] for key, value in by_operation.items()}


def from_json(data: dict[str, Any]) -> Results:
    """The inverse of ``to_json`` (summaries are recomputed, not read)."""
    results = Results(meta=data["meta"])
    for n, samples in data["program"].items():
        results.program[int(n)] = [ProgramSample(**sample) for sample in samples]
    for n, raw in data["single"].items():
        size = results.single[int(n)] = SizeResult(int(n), raw["repetitions_requested"])
        size.ours, size.floor = _samples(raw["ours"]), _samples(raw["floor"])
        size.naive = _samples(raw.get("naive") or {})
        size.state_bytes, size.note = raw["state_bytes_after_first_up"], raw["note"]
    if (p := data.get("parallel")) is not None:
        results.parallel = ParallelResult(
            p["stacks"], p["per_stack"], p["parallel"], _samples(p["many"]), _samples(p["one"])
        )
        results.parallel.one_source, results.parallel.note = p["one_source"], p["note"]
    for backend, by_size in (data.get("backends") or {}).items():
        results.backends[backend] = {
            int(n): [{key: BackendSample(**v) for key, v in rep.items()} for rep in reps]
            for n, reps in by_size.items()
        }
    for n, sides in (data.get("pack") or {}).items():
        results.pack[int(n)] = {side: _samples(ops) for side, ops in sides.items()}
    for n, sides in (data.get("rolling") or {}).items():
        results.rolling[int(n)] = _samples(sides)
    return results


def write_json(results: Results, path: Path) -> None:
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps(to_json(results), indent=1) + "\n")
    partial.replace(path)
