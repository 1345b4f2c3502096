"""``infercrane-pulumi`` (``python -m infercrane_pulumi``): the command line for people and for
control planes written in any language.

The only module that prints or chooses exit codes. Handlers return a ``Result``; one renderer
prints it as a table (YAML for ``render``) or, with ``--json``, as a versioned envelope that
``schemas/envelope.schema.json`` describes. Progress of ``preview``/``up``/``destroy`` goes to
stderr: JSON Lines with ``--events``, the engine's live lines on a terminal, else nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from infercrane_pulumi import comments, manifests, offline_diff, views, workloads
from infercrane_pulumi.automation import PulumiEnvironment, namespaces, results, stacks
from infercrane_pulumi.automation.project import PROJECT_NAME, STACK_CONFIG_DIR
from infercrane_pulumi.cluster import client, doctor, observe
from infercrane_pulumi.errors import (
    ClusterUnavailableError,
    ConfigError,
    InferCraneError,
    StackBusyError,
)
from infercrane_pulumi.intents import StackConfig, load_stack_file

ENVELOPE_VERSION = "infercrane.dev/cli/v1"
EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_UNAVAILABLE, EXIT_BUSY = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130
Connect = Callable[[Any], client.Cluster]


@dataclass
class Result:
    command: str
    ok: bool
    data: Any = None
    text: str = ""
    rows: list[list[str]] = field(default_factory=list)
    header: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Context:
    """What a handler may use besides its arguments: the outside world, injectable in tests."""

    connect: Connect
    environ: Mapping[str, str]
    stderr: TextIO


def stack_file(args: argparse.Namespace) -> Path:
    if args.config is not None:
        return Path(args.config)
    return Path(args.project_dir) / STACK_CONFIG_DIR / f"Pulumi.{args.stack}.yaml"


def render(args: argparse.Namespace, ctx: Context) -> Result:
    objects = workloads.stack_objects(load_stack_file(stack_file(args)))
    return Result("render", True, data=objects, text=manifests.to_yaml(objects))


def run_doctor(args: argparse.Namespace, ctx: Context) -> Result:
    config = load_stack_file(stack_file(args))
    rows = doctor.doctor(ctx.connect(config.kubernetes), config.kubernetes)
    header, table = views.doctor_table(rows)
    ok = all(row.status != "fail" for row in rows)
    return Result("doctor", ok, data=views.to_json(rows), header=header, rows=table)


def inspect(args: argparse.Namespace, ctx: Context) -> Result:
    config = load_stack_file(stack_file(args))
    keys = None if args.key is None else [args.key]
    found = observe.observe(ctx.connect(config.kubernetes), config, keys)
    header, table = views.observation_table(found)
    return Result("inspect", True, data=views.to_json(found), header=header, rows=table)


def pulumi_environment(args: argparse.Namespace, environ: Mapping[str, str]) -> PulumiEnvironment:
    """Backend, passphrase and tools from flags, else the documented environment variables."""
    problems = []
    backend = args.backend_url or environ.get("PULUMI_BACKEND_URL")
    if not backend:
        problems.append("no backend: pass --backend-url or set PULUMI_BACKEND_URL")
    passphrase_file = args.passphrase_file or environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    passphrase = environ.get("PULUMI_CONFIG_PASSPHRASE")
    if passphrase_file:
        try:
            passphrase = Path(passphrase_file).read_text().rstrip("\n")
        except OSError as error:
            problems.append(f"--passphrase-file: cannot read ({error.strerror})")
    if passphrase is None and not passphrase_file:
        problems.append(
            "no passphrase: pass --passphrase-file or set PULUMI_CONFIG_PASSPHRASE(_FILE)"
        )
    if problems:
        raise ConfigError(problems)
    tools = args.tools_bin or environ.get("INFERCRANE_TOOLS_BIN")
    kubeconfig = environ.get("KUBECONFIG")
    assert backend is not None and passphrase is not None
    return PulumiEnvironment.for_backend(
        backend,
        pulumi_home=Path(args.pulumi_home or environ.get("PULUMI_HOME") or Path.home() / ".pulumi"),
        passphrase=passphrase,
        bin_dir=Path(tools) if tools else None,
        kubeconfig=Path(kubeconfig) if kubeconfig else None,
    )


def run_stack(args: argparse.Namespace, ctx: Context) -> Result:
    """``preview``, ``up`` or ``destroy`` of the stack file, with per-key results."""
    config: StackConfig = load_stack_file(stack_file(args))
    env = pulumi_environment(args, ctx.environ)
    events: list[Any] = []

    def on_event(event: Any) -> None:
        events.append(event)
        record = views.progress_record(event) if args.events else None
        if record is not None:
            ctx.stderr.write(json.dumps(record, sort_keys=True) + "\n")
            ctx.stderr.flush()

    live = None if args.events or not ctx.stderr.isatty() else ctx.stderr.write
    stack = stacks.open_stack(args.stack, project_dir=Path(args.project_dir), env=env)
    result = namespaces.run_config(
        stack,
        env,
        args.command,
        config,
        on_output=live,
        on_event=on_event,
        wait_seconds=args.wait,
    )
    if args.format == "markdown":
        review = results.stack_changes(args.command, PROJECT_NAME, args.stack, events)
        return Result(args.command, True, text=comments.comment([review]))
    header, rows = views.stack_result_table(result)
    return Result(
        args.command,
        True,
        data=views.stack_result_json(result),
        header=header,
        rows=[*rows, [views.summary_line(result)]],
    )


def diff(args: argparse.Namespace, ctx: Context) -> Result:
    """The offline diff against a git base: no cluster, no Pulumi, no secrets."""
    configs = None if args.all else [Path(args.config).resolve()]
    data, markdown = offline_diff.diff_command(
        base=args.base, configs=configs, repo=Path(args.project_dir)
    )
    return Result("diff", True, data=data, text=markdown)


HANDLERS: dict[str, Callable[[argparse.Namespace, Context], Result]] = {
    "render": render,
    "doctor": run_doctor,
    "inspect": inspect,
    "preview": run_stack,
    "up": run_stack,
    "destroy": run_stack,
    "diff": diff,
}
HELP = {
    "render": "print the exact objects of a stack as YAML (no cluster, no Pulumi)",
    "doctor": "check API, KServe API and every namespaced permission; creates nothing",
    "inspect": "observe each replica: state, reason, objects and their raw conditions",
    "preview": "what `up` would change, per external key (refreshes first; writes nothing)",
    "up": "apply the stack: refresh, ownership preflight, server-side apply (never forced)",
    "destroy": "delete every object of the stack (the preflight runs first)",
    "diff": "what a change does, per key, against a git base (offline: no cluster, no secrets)",
}


STACK_COMMANDS = ("preview", "up", "destroy")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="infercrane-pulumi")
    commands = root.add_subparsers(dest="command", required=True)
    for name, text in HELP.items():
        command = commands.add_parser(name, help=text)
        if name in STACK_COMMANDS:
            command.add_argument("--stack", required=True, help="stack name")
            command.set_defaults(config=None)
        elif name == "diff":
            which = command.add_mutually_exclusive_group(required=True)
            which.add_argument("--config", type=Path, help="a stack file (Pulumi.<stack>.yaml)")
            which.add_argument("--all", action="store_true", help="every stack under stacks/")
            command.add_argument("--base", required=True, help="git ref to compare against")
        else:
            where = command.add_mutually_exclusive_group(required=True)
            where.add_argument("--config", type=Path, help="a stack file (Pulumi.<stack>.yaml)")
            where.add_argument(
                "--stack", help="stack name: <project-dir>/stacks/Pulumi.<stack>.yaml"
            )
        command.add_argument("--project-dir", default=".", help="where Pulumi.yaml is")
        command.add_argument("--json", action="store_true", help="versioned JSON envelope")
        if name in ("preview", "diff"):
            command.add_argument(
                "--format",
                choices=["table", "json", "markdown"],
                default="markdown" if name == "diff" else "table",
                help="markdown: the pull-request comment; json: same as --json",
            )
        if name == "inspect":
            command.add_argument("--key", help="observe one external key only")
        if name in STACK_COMMANDS:
            for flag, default in (
                ("--backend-url", "default: $PULUMI_BACKEND_URL"),
                ("--passphrase-file", "default: $PULUMI_CONFIG_PASSPHRASE_FILE"),
                ("--pulumi-home", "default: $PULUMI_HOME, else ~/.pulumi"),
                ("--tools-bin", "dir holding `pulumi`; default: $INFERCRANE_TOOLS_BIN, else PATH"),
            ):
                command.add_argument(flag, help=default)
            command.add_argument(
                "--wait", type=float, default=0.0, help="seconds to wait for a busy stack"
            )
            command.add_argument(
                "--events", action="store_true", help="progress as JSON Lines on stderr"
            )
    return root


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(str(r[i])) for r in [header, *rows] if len(r) == len(header))
        for i in range(len(header))
    ]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        if len(row) == len(header)
        else row[0]
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


def exit_code(error: InferCraneError) -> int:
    if isinstance(error, ConfigError):
        return EXIT_INVALID
    if isinstance(error, ClusterUnavailableError):
        return EXIT_UNAVAILABLE
    return EXIT_BUSY if isinstance(error, StackBusyError) else EXIT_FAILED


def main(
    argv: Sequence[str] | None = None,
    *,
    connect: Connect = client.connect,
    environ: Mapping[str, str] = os.environ,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    args = parser().parse_args(argv)
    args.json = args.json or getattr(args, "format", None) == "json"
    args.format = getattr(args, "format", "table")
    try:
        result = HANDLERS[args.command](args, Context(connect, environ, stderr))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except InferCraneError as error:
        emit_error(
            error, command=args.command, as_json=args.json, out=stdout if args.json else stderr
        )
        return exit_code(error)
    emit(result, as_json=args.json, out=stdout)
    return EXIT_OK if result.ok else EXIT_FAILED
