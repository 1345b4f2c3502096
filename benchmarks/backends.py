"""The state backend as a dimension: the same runs on the file backend, on PostgreSQL (state and
stack leases in one database) and on an S3 server (versitygw over a directory, the leases in
PostgreSQL), each started for the benchmark on loopback.

Per step (first up, no-op up, destroy) it records the wall time and the state bytes the run
wrote: every state object the backend holds after the run that is new or changed, read in the
store itself (files; PostgreSQL rows as stored, base64 JSON) — the per-run cost a shared backend
adds. The PostgreSQL server is durable (fsync on), as a control plane's would be.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import scenario
from benchmarks.ours import expect
from benchmarks.progress import EventCounter, Progress
from benchmarks.workbench import Workbench
from infercrane_dev.localcluster.processes import ManagedProcess
from infercrane_dev.statestores import postgres, s3
from infercrane_pulumi import automation
from infercrane_pulumi.automation import NamespaceStack, StackResult

BACKENDS = ("file", "postgres", "s3")
STEPS = {"up": "first up", "noop": "no-op up", "destroy": "destroy"}
Listing = dict[str, tuple[int, str]]  # state object -> (stored bytes, version stamp)


@dataclass(frozen=True)
class Store:
    env: automation.PulumiEnvironment
    listing: Callable[[], Listing]
    # The servers it runs (sampled apart from the runs' own processes, like the API server).
    pids: tuple[int, ...] = ()


@dataclass(frozen=True)
class BackendSample:
    wall_s: float
    bytes_written: int
    objects_written: int


def written(before: Listing, after: Listing) -> tuple[int, int]:
    """Bytes and objects new or changed between two listings."""
    changed = [size for key, (size, stamp) in after.items() if before.get(key) != (size, stamp)]
    return sum(changed), len(changed)


def files(root: Path) -> Callable[[], Listing]:
    def listing() -> Listing:
        return {
            str(path.relative_to(root)): (path.stat().st_size, str(path.stat().st_mtime_ns))
            for path in root.rglob("*")
            if path.is_file()
        }

    return listing


def rows(server: postgres.PostgresServer) -> Callable[[], Listing]:
    def listing() -> Listing:
        with server.connect() as admin:
            found = admin.execute(
                "SELECT key, octet_length(data::text), updated_at::text FROM pulumi_state"
            ).fetchall()
        return {str(key): (int(size), str(stamp)) for key, size, stamp in found}

    return listing


@contextlib.contextmanager
def stores(bench: Workbench, names: tuple[str, ...]) -> Iterator[Mapping[str, Store]]:
    """The named backends, started for the run and removed after it."""
    with contextlib.ExitStack() as started:
        fields: dict[str, Any] = {
            "pulumi_home": bench.env.pulumi_home,
            "passphrase": bench.env.passphrase,
            "bin_dir": bench.env.bin_dir,
            "kubeconfig": bench.env.kubeconfig,
        }
        found: dict[str, Store] = {}
        state_dir = bench.root / "backend-file"
        state_dir.mkdir(exist_ok=True)
        found["file"] = Store(
            automation.PulumiEnvironment(state_dir=state_dir, **fields), files(state_dir)
        )
        if {"postgres", "s3"} & set(names):
            database = started.enter_context(postgres.running(durable=True))
            found["postgres"] = Store(
                automation.PulumiEnvironment.for_backend(database.url_with_password, **fields),
                rows(database),
                _pids(database.process),
            )
        if "s3" in names:
            bucket = started.enter_context(s3.running())
            env = automation.PulumiEnvironment.for_backend(
                bucket.url,
                lease_url=database.url_with_password,
                backend_variables=bucket.variables,
                **fields,
            )
            found["s3"] = Store(
                env, files(bucket.root / s3.BUCKET), _pids(database.process, bucket.process)
            )
        yield {name: found[name] for name in names}


def _pids(*processes: ManagedProcess | None) -> tuple[int, ...]:
    return tuple(process.pid for process in processes if process is not None)


def lifecycle(
    bench: Workbench, progress: Progress, backend: str, store: Store, *, n: int, rep: int
) -> dict[str, BackendSample]:
    """First up, no-op up and destroy of N intents on one backend."""
    namespace = f"bench-{n}-{backend}"
    events = EventCounter()
    stack = NamespaceStack(
        bench.namespace(namespace),
        store.env,
        bench.workspace(f"{backend}-{n}-r{rep}"),
        stack_name=f"{backend}-{n}-r{rep}",
        on_event=events,
    )
    stack.stack()  # created outside the measured steps
    desired = scenario.intents(n)
    steps: dict[str, tuple[Callable[[], StackResult], Callable[[StackResult], bool]]] = {
        "up": (lambda: stack.ensure(desired), lambda r: r.summary.add == n),
        "noop": (lambda: stack.ensure(desired), lambda r: r.summary.same == n),
        "destroy": (stack.destroy, lambda r: r.summary.destroy == n),
    }
    samples: dict[str, BackendSample] = {}
    for key, (call, wanted) in steps.items():
        label = f"N={n} rep {rep} on {backend}: {STEPS[key]}"
        events.reset()
        before = store.listing()
        result, usage = progress.measure(label, call, events.status)
        expect(label, result, wanted)
        size, count = written(before, store.listing())
        samples[key] = BackendSample(usage.wall_s, size, count)
        progress.say(f"  {label}: wrote {count} state object(s), {size} bytes")
        bench.settle(namespace, 0 if key == "destroy" else n, progress.say)
    return samples
