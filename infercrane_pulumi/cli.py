"""``python -m infercrane_pulumi``: render, doctor and inspect.

The only module that prints or chooses exit codes. Handlers return a ``Result``; one renderer
prints it as a table (or YAML for render) or as a versioned JSON envelope with ``--json``.
Exit codes: 0 ok, 1 failed, 2 invalid input, 3 cluster unavailable (retry), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from infercrane_pulumi import manifests, workloads
from infercrane_pulumi.cluster import client, observe
from infercrane_pulumi.cluster import doctor as checks
from infercrane_pulumi.errors import ClusterUnavailableError, ConfigError, InferCraneError
from infercrane_pulumi.intents import load_stack_file

ENVELOPE_VERSION = "infercrane.dev/cli/v1"
EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass
class Result:
    command: str
    ok: bool
    data: Any = None
    text: str = ""
    rows: list[list[str]] = field(default_factory=list)
    header: list[str] = field(default_factory=list)


def render(args: argparse.Namespace, connect: Callable[..., client.Cluster]) -> Result:
    config = load_stack_file(args.config)
    objects = workloads.stack_objects(config)
    return Result("render", True, data=objects, text=manifests.to_yaml(objects))


def doctor(args: argparse.Namespace, connect: Callable[..., client.Cluster]) -> Result:
    config = load_stack_file(args.config)
    rows = checks.doctor(connect(config.kubernetes), config.kubernetes)
    return Result(
        "doctor",
        all(row.status == "ok" for row in rows),
        data=[asdict(row) for row in rows],
        header=["STATUS", "NAME", "MESSAGE"],
        rows=[[row.status.upper(), row.name, row.message] for row in rows],
    )


def inspect(args: argparse.Namespace, connect: Callable[..., client.Cluster]) -> Result:
    config = load_stack_file(args.config)
    entries = observe.observe(connect(config.kubernetes), config)
    rows = [
        [
            entry.external_key,
            entry.state,
            f"{obj.kind}/{obj.name}" if obj else "-",
            observe.conditions_summary(obj) if obj else "-",
        ]
        for entry in entries
        for obj in entry.objects or [None]
    ]
    return Result(
        "inspect",
        True,
        data=[asdict(entry) for entry in entries],
        header=["KEY", "STATE", "OBJECT", "CONDITIONS"],
        rows=rows,
    )


HANDLERS = {"render": render, "doctor": doctor, "inspect": inspect}


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m infercrane_pulumi")
    commands = root.add_subparsers(dest="command", required=True)
    helps = {
        "render": "print the exact objects of a stack as YAML (no cluster, no Pulumi)",
        "doctor": "check API, KServe API and every namespaced permission; creates nothing",
        "inspect": "show owned objects with their raw conditions",
    }
    for name, text in helps.items():
        command = commands.add_parser(name, help=text)
        command.add_argument(
            "--config", type=Path, required=True, help="stacks/Pulumi.<stack>.yaml"
        )
        command.add_argument("--json", action="store_true", help="versioned JSON envelope")
    return root


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def emit(result: Result, *, as_json: bool, out: TextIO) -> None:
    if as_json:
        envelope = {"apiVersion": ENVELOPE_VERSION, "command": result.command, "ok": result.ok}
        out.write(json.dumps(envelope | {"result": result.data}, sort_keys=True) + "\n")
    elif result.header:
        out.write(_table(result.header, result.rows) + "\n")
    else:
        out.write(result.text)


def emit_error(error: InferCraneError, *, command: str, as_json: bool, out: TextIO) -> None:
    if as_json:
        envelope = {"apiVersion": ENVELOPE_VERSION, "command": command, "ok": False}
        out.write(json.dumps(envelope | {"error": error.to_record()}, sort_keys=True) + "\n")
    else:
        out.write("".join(f"{command}: {problem}\n" for problem in error.problems))


def main(
    argv: Sequence[str] | None = None,
    *,
    connect: Callable[..., client.Cluster] = client.connect,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    args = parser().parse_args(argv)
    try:
        result = HANDLERS[args.command](args, connect)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except InferCraneError as error:
        out = stdout if args.json else stderr
        emit_error(error, command=args.command, as_json=args.json, out=out)
        if isinstance(error, ConfigError):
            return EXIT_INVALID
        return EXIT_UNAVAILABLE if isinstance(error, ClusterUnavailableError) else EXIT_FAILED
    emit(result, as_json=args.json, out=stdout)
    return EXIT_OK if result.ok else EXIT_FAILED
