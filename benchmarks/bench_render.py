"""How validation and rendering scale with the number of intents N (pure, no cluster).

Run: .venv/bin/python -m benchmarks.bench_render [N ...]
Writes benchmarks/results/render.{json,svg}.
Not a test: numbers depend on the machine; nothing asserts a duration.
"""

from __future__ import annotations

import sys
import time

from benchmarks.plot import save
from infercrane_pulumi import manifests, workloads
from infercrane_pulumi.intents import parse_stack_config

IMAGE = "registry.example/vllm@sha256:" + "ab" * 32


def measure(n: int, repeat: int = 5) -> dict[str, float]:
    replicas = [
        {
            "externalKey": f"bench-{i}",
            "model": "Qwen/Qwen3-8B",
            "gpu": "NVIDIA-L4",
            "runtimeArgs": ["--max-model-len", "8192"],
        }
        for i in range(n)
    ]
    best = {"validate": float("inf"), "render": float("inf")}
    for _ in range(repeat):
        started = time.perf_counter()
        config = parse_stack_config({"context": "c", "imageDigest": IMAGE}, replicas)
        validated = time.perf_counter()
        manifests.to_yaml(workloads.stack_objects(config))
        rendered = time.perf_counter()
        best["validate"] = min(best["validate"], validated - started)
        best["render"] = min(best["render"], rendered - validated)
    return best


def main(argv: list[str]) -> int:
    sizes = [int(a) for a in argv] or [1, 10, 100, 500, 1000]
    results = {n: measure(n) for n in sizes}
    save("render", results, title="validate + render vs intents", y_label="seconds (best of 5)")
    for n, r in results.items():
        print(
            f"N={n:5d}  validate {r['validate'] * 1e3:8.2f} ms  render {r['render'] * 1e3:8.2f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
