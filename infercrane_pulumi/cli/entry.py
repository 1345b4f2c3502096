"""``infercrane-pulumi`` (``python -m infercrane_pulumi``): the command line for people and for
control planes written in any language.

``main`` parses the arguments (one parser, made from the command table: ``commands``), runs the
command once or, with ``--every``, in the runner's loop (``every``), renders its result
(``views``), and maps an error to its exit code through the map beside the error registry
(``errors.EXIT_CODES``). A failure nobody foresaw is reported as ``internal-error`` (exit 1)
naming only its type, never a traceback. Progress of the stack commands goes to stderr: JSON
Lines with ``--events``, the engine's live lines on a terminal, else nothing.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from infercrane_pulumi.automation import pulumi_versions
from infercrane_pulumi.automation.stackfiles import stack_name
from infercrane_pulumi.cli import every, views
from infercrane_pulumi.cli.commands import (
    BY_NAME,
    COMMANDS,
    Command,
    Connect,
    Context,
    stack_file_of,
)
from infercrane_pulumi.cluster import client, runstatus
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.files import parse_stack_settings, read_settled
from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.errors import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    ConfigError,
    InferCraneError,
    InternalError,
)
from infercrane_pulumi.program.components import PLUGIN_VERSION


def version_line() -> str:
    """Ours, and the Pulumi this installation pairs with (``pulumi_versions``)."""
    sdk = pulumi_versions.sdk_version()
    return (
        f"infercrane-pulumi {importlib.metadata.version('infercrane-pulumi')} (pulumi SDK {sdk}, "
        f"CLI {pulumi_versions.supported_cli(sdk)}; pulumi-kubernetes plugin {PLUGIN_VERSION})"
    )


def parser(commands: Sequence[Command] = COMMANDS) -> argparse.ArgumentParser:
    # ``commands``: the documentation's CLI reference is made from this same parser
    # (infercrane_dev/docsgen.py), for a table it is given in its tests.
    # Raw text: the version line stays one line.
    root = argparse.ArgumentParser(
        prog="infercrane-pulumi", formatter_class=argparse.RawTextHelpFormatter
    )
    root.add_argument("--version", action="version", version=version_line())
    subcommands = root.add_subparsers(dest="command", required=True)
    for command in commands:
        sub = subcommands.add_parser(command.name, help=command.help)
        for add in command.flags:
            add(sub)
        sub.add_argument("--json", action="store_true", help="versioned JSON envelope")
    return root


def main(
    argv: Sequence[str] | None = None,
    *,
    connect: Connect = client.connect,
    environ: Mapping[str, str] = os.environ,
    stdout: TextIO = sys.stdout,
    stderr: TextIO = sys.stderr,
) -> int:
    args = parser().parse_args(argv)
    args.format = getattr(args, "format", "table")
    ctx = Context(connect, environ, stderr)
    where: dict[str, KubernetesSettings] = {}  # the status's settings, kept between runs
    if getattr(args, "every", None) is None:
        return _once(args, ctx, stdout, where)
    return every.until_terminated(
        lambda: _once(args, ctx, stdout, where), watched=stack_file_of(args), every=args.every
    )


def _once(
    args: argparse.Namespace,
    ctx: Context,
    stdout: TextIO,
    where: dict[str, KubernetesSettings],
) -> int:
    """One command: its result (or its one classified error) rendered, its exit code."""
    as_json = args.json or args.format == "json"
    try:
        result = BY_NAME[args.command].handler(args, ctx)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as caught:  # every failure ends as one classified error, never a traceback
        error = _classified(caught, where=args.command)
        out = stdout if as_json else ctx.stderr
        views.emit_error(error, command=args.command, as_json=as_json, out=out)
        out.flush()
        _report(args, ctx, views.error_envelope(error, command=args.command), where)
        return EXIT_CODES[error.code]
    views.emit(result, as_json=as_json, out=stdout)
    stdout.flush()
    _report(args, ctx, views.envelope(result), where)
    if result.exit_code is not None:
        return result.exit_code
    return EXIT_OK if result.ok else EXIT_FAILED


def _report(
    args: argparse.Namespace,
    ctx: Context,
    envelope: Mapping[str, Any],
    where: dict[str, KubernetesSettings],
) -> None:
    """With ``--status-configmap``: the run's envelope in its status object, where the stack
    file's settings say; a file refused whole (YAML that cannot be read, aliases past the
    bound) says nothing of them, so its refusal goes where the last file that did put it
    (``where``, kept by the loop). A status that cannot be written changes no exit code (the
    run's outcome is the run's); it is said in one line on stderr, and the next run writes it
    again."""
    name = getattr(args, "status_configmap", None)
    if name is None:
        return
    path = stack_file_of(args)
    finished_at = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        try:
            where[name] = parse_stack_settings(read_settled(path), source=str(path))
        except ConfigError:
            if name not in where:
                raise
        settings = where[name]
        cluster = ctx.connect(
            kubeconfigs.resolved(settings, kubeconfigs.from_environment(ctx.environ))
        )
        runstatus.publish(
            cluster,
            settings.namespace,
            name,
            stack=stack_name(path),
            envelope=envelope,
            finished_at=finished_at,
        )
    except Exception as caught:  # the loop goes on whatever happened here
        error = _classified(caught, where=f"{args.command} status")
        ctx.stderr.write(f"{args.command}: status not written: {error.code}: {error}\n")
        ctx.stderr.flush()


def _classified(caught: Exception, *, where: str) -> InferCraneError:
    return caught if isinstance(caught, InferCraneError) else InternalError.of(caught, where=where)
