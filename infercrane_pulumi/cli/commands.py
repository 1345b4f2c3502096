"""``infercrane-pulumi`` (``python -m infercrane_pulumi``): the command line for people and for
control planes written in any language.

One table of commands, each with its help, its flags and its handler. Handlers return a
``views.Result`` and never print; ``main`` renders it (``views``), and maps an error to its
exit code through the map beside the error registry (``errors.EXIT_CODES``). A failure nobody
foresaw is reported as ``internal-error`` (exit 1) naming only its type, never a traceback.
Progress of the stack commands goes to stderr: JSON Lines with ``--events``, the engine's live
lines on a terminal, else nothing.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from infercrane_pulumi.automation import (
    EnvironmentFlags,
    Operation,
    PolicyPack,
    PulumiEnvironment,
    RunOptions,
    inspect_stack_file,
    pulumi_versions,
    resolve_environment,
    run_stack_file,
)
from infercrane_pulumi.automation.environment import pulumi_paths
from infercrane_pulumi.automation.stackfiles import stack_name
from infercrane_pulumi.cli import every, views
from infercrane_pulumi.cluster import client, doctor, runstatus
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.files import (
    QUIET_SECONDS,
    load_policy_file,
    load_stack_file,
    parse_stack_settings,
    read_settled,
    stack_file,
)
from infercrane_pulumi.config.intents import KubernetesSettings, PolicySettings, StackConfig
from infercrane_pulumi.errors import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_POLICY,
    ConfigError,
    InferCraneError,
    InternalError,
)
from infercrane_pulumi.objects import manifests, workloads
from infercrane_pulumi.program.components import PLUGIN_VERSION
from infercrane_pulumi.review import comments, offline_diff

Connect = Callable[[Any], client.Cluster]
Flags = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Context:
    """What a handler may use besides its arguments: the outside world, injectable in tests."""

    connect: Connect
    environ: Mapping[str, str]
    stderr: TextIO


Handler = Callable[[argparse.Namespace, Context], views.Result]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    flags: tuple[Flags, ...]
    handler: Handler


# -- handlers -----------------------------------------------------------------------------------


def _stack_file(args: argparse.Namespace) -> Path:
    if getattr(args, "config", None) is not None:
        return Path(args.config)
    return stack_file(Path(args.project_dir), args.stack)


def _config(args: argparse.Namespace) -> StackConfig:
    return load_stack_file(_stack_file(args))


def render(args: argparse.Namespace, ctx: Context) -> views.Result:
    objects = workloads.stack_objects(_config(args))
    return views.Result("render", True, data=objects, text=manifests.to_yaml(objects))


def run_doctor(args: argparse.Namespace, ctx: Context) -> views.Result:
    config = _config(args)
    settings = kubeconfigs.resolved(config.kubernetes, kubeconfigs.from_environment(ctx.environ))
    rows = doctor.doctor(ctx.connect(settings), config.kubernetes)
    bin_dir, pulumi_home = pulumi_paths(EnvironmentFlags(), ctx.environ)
    rows += pulumi_versions.rows(
        pulumi_versions.installed(bin_dir, pulumi_home, ctx.environ.get("PATH", ""))
    )
    header, table = views.doctor_table(rows)
    ok = all(row.status != "fail" for row in rows)
    return views.Result("doctor", ok, data=views.to_json(rows), header=header, rows=table)


def _environment(args: argparse.Namespace, ctx: Context) -> PulumiEnvironment:
    flags = EnvironmentFlags(
        backend_url=args.backend_url,
        lease_url=args.lease_url,
        passphrase_file=args.passphrase_file,
        pulumi_home=args.pulumi_home,
        tools_bin=args.tools_bin,
    )
    return resolve_environment(flags, ctx.environ)


def inspect(args: argparse.Namespace, ctx: Context) -> views.Result:
    """Each key as ``NamespaceStack.observe`` judges it: against what the stack applied."""
    keys = None if args.key is None else [args.key]
    found = inspect_stack_file(_stack_file(args), _environment(args, ctx), ctx.connect, keys)
    header, table = views.observation_table(found)
    return views.Result("inspect", True, data=views.to_json(found), header=header, rows=table)


def run_stack(args: argparse.Namespace, ctx: Context) -> views.Result:
    """``preview``, ``up``, ``destroy`` or ``remove`` of the stack file, per-key results."""
    env = _environment(args, ctx)

    def on_event(event: Any) -> None:
        record = views.progress_record(event)
        if record is not None:
            ctx.stderr.write(json.dumps(record, sort_keys=True) + "\n")
            ctx.stderr.flush()

    options = RunOptions(
        on_output=None if args.events or not ctx.stderr.isatty() else ctx.stderr.write,
        on_event=on_event if args.events else None,
        wait_seconds=args.wait,
        refresh=getattr(args, "refresh", False),
        policy_pack=_pack(args),
        platform_policy=_platform_policy(args),
        timeout_seconds=args.timeout,
    )
    remove_key = args.key if args.command == "remove" else None
    operation: Operation = "up" if remove_key is not None else args.command
    result = run_stack_file(
        _stack_file(args),
        env,
        operation,
        options=options,
        remove_key=remove_key,
        configmap=getattr(args, "configmap", None),
        # The loop reads a file someone else rewrites when they please: only once it is quiet.
        quiet=QUIET_SECONDS if getattr(args, "every", None) is not None else 0.0,
    )
    if args.format == "markdown":
        return views.Result(args.command, True, text=comments.comment([result]))
    header, rows = views.stack_result_table(result)
    return views.Result(
        args.command,
        True,
        data=views.stack_changes(result),
        header=header,
        rows=rows,
        footer=views.summary_line(result),
    )


def _pack(args: argparse.Namespace) -> PolicyPack | None:
    directory, config = (
        getattr(args, "policy_pack", None),
        getattr(args, "policy_pack_config", None),
    )
    if directory is None:
        if config is not None:
            raise ConfigError(["--policy-pack-config: needs --policy-pack"])
        return None
    return PolicyPack(directory.resolve(), None if config is None else config.resolve())


def _platform_policy(args: argparse.Namespace) -> PolicySettings | None:
    """``--policy``'s file, read anew for each run (``up --every``'s too)."""
    path = getattr(args, "policy", None)
    return None if path is None else load_policy_file(path)


def diff(args: argparse.Namespace, ctx: Context) -> views.Result:
    """The offline diff against a git base: no cluster, no Pulumi, no secrets."""
    configs = None if args.all else [Path(args.config).resolve()]
    stacks, markdown = offline_diff.diff_command(
        base=args.base,
        configs=configs,
        repo=Path(args.project_dir),
        platform=_platform_policy(args),
    )
    gate = args.policy_gate and any(stack.breaks_policy for stack in stacks)
    return views.Result(
        "diff",
        True,
        data=[views.stack_changes(stack) for stack in stacks],
        text=markdown,
        exit_code=EXIT_POLICY if gate else None,
    )


# -- flags --------------------------------------------------------------------------------------


def _stack_or_file(command: argparse.ArgumentParser) -> None:
    where = command.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, help="a stack file (Pulumi.<stack>.yaml)")
    where.add_argument("--stack", help="stack name: <project-dir>/stacks/Pulumi.<stack>.yaml")


def _stack(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--stack", required=True, help="stack name: <project-dir>/stacks/Pulumi.<stack>.yaml"
    )


def _project_dir(command: argparse.ArgumentParser) -> None:
    command.add_argument("--project-dir", default=".", help="where stacks/ is (default: .)")


def _backend(command: argparse.ArgumentParser) -> None:
    for flag, default in (
        ("--backend-url", "default: $PULUMI_BACKEND_URL (a password in it: prefer $PGPASSWORD)"),
        (
            "--lease-url",
            "PostgreSQL for stack leases, required by a backend other than file:// "
            "or postgres://; default: $INFERCRANE_LEASE_URL",
        ),
        ("--passphrase-file", "default: $PULUMI_CONFIG_PASSPHRASE_FILE"),
        ("--pulumi-home", "default: $PULUMI_HOME, else ~/.pulumi"),
        ("--tools-bin", "dir holding `pulumi`; default: $INFERCRANE_TOOLS_BIN, else PATH"),
    ):
        command.add_argument(flag, help=default)


def _progress(command: argparse.ArgumentParser) -> None:
    command.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a busy stack")
    command.add_argument("--events", action="store_true", help="progress as JSON Lines on stderr")
    command.add_argument(
        "--timeout",
        type=every.period,
        metavar="SECONDS",
        help="stop the engine this long after the run started (run-timeout, retryable: the "
        "next run recovers what it left); default: no deadline",
    )


def _refresh(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--refresh",
        action="store_true",
        help="refresh from the cluster first (default: only when it drifted from the stack)",
    )


def _policy_pack(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--policy-pack",
        type=Path,
        help="InferCrane's CrossGuard pack (the repository's policy/) for the engine to run",
    )
    command.add_argument(
        "--policy-pack-config",
        type=Path,
        help="the pack's configuration, a JSON file of rule names (default: the rules' own)",
    )


def _platform(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="the platform's policy, a YAML mapping of infercrane:policy's keys: the stack "
        "file's own infercrane:policy may only tighten it (default: the stack file's alone)",
    )


def _named_configmap(flag: str, what: str) -> Flags:
    """A flag naming a ConfigMap of the stack's namespace."""

    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument(flag, metavar="NAME", help=what)

    return add


_configmap = _named_configmap(
    "--configmap",
    "apply the stack file as ConfigMap NAME of the stack's namespace holds it (under the file's "
    "name), read from the API server once the stack is held and never older than the version "
    "the stack applied; the file itself (the kubelet's copy) only says how to reach the "
    "cluster. Needs `get` on that ConfigMap",
)
_status = _named_configmap(
    "--status-configmap",
    "after each run, write what it did to ConfigMap NAME of the stack's namespace (server-side "
    "apply, never forced): the stack file's version it applied, each key's change, the last "
    "error (cluster/runstatus.py). Needs `get` and `patch` on it",
)


def _every(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--every",
        type=every.period,
        metavar="SECONDS",
        help="keep applying the stack file: again as soon as it changes and at least every "
        "SECONDS, one result per run (with --json, one envelope per line), until SIGTERM or "
        "SIGINT, which end the loop after the run in flight",
    )


def _key(required: bool) -> Flags:
    def add(command: argparse.ArgumentParser) -> None:
        text = "the external key" if required else "observe one external key only"
        command.add_argument("--key", required=required, help=text)

    return add


def _format(choices: Sequence[str], default: str) -> Flags:
    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--format",
            choices=list(choices),
            default=default,
            help="markdown: the pull-request comment; json: same as --json",
        )

    return add


def _diff_sides(command: argparse.ArgumentParser) -> None:
    which = command.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", type=Path, help="a stack file (Pulumi.<stack>.yaml)")
    which.add_argument("--all", action="store_true", help="every stack under stacks/")
    command.add_argument("--base", required=True, help="git ref to compare against")
    command.add_argument(
        "--policy-gate",
        action="store_true",
        help="exit 5 when the change breaks a mandatory policy rule it did not break at base "
        "(the diff is printed all the same)",
    )


RUN = (_stack, _project_dir, _backend, _progress)
COMMANDS: tuple[Command, ...] = (
    Command(
        "render",
        "print the exact objects of a stack as YAML (no cluster, no Pulumi)",
        (_stack_or_file, _project_dir),
        render,
    ),
    Command(
        "doctor",
        "check API, KServe API, every namespaced permission, the Pulumi CLI and plugin; "
        "creates nothing",
        (_stack_or_file, _project_dir),
        run_doctor,
    ),
    Command(
        "inspect",
        "observe each applied replica: state, reason, objects and their raw conditions",
        (_stack_or_file, _project_dir, _backend, _key(required=False)),
        inspect,
    ),
    Command(
        "preview",
        "what `up` would change, per external key (writes nothing)",
        (
            *RUN,
            _refresh,
            _policy_pack,
            _platform,
            _configmap,
            _format(("table", "json", "markdown"), "table"),
        ),
        run_stack,
    ),
    Command(
        "up",
        "apply the stack: ownership preflight, server-side apply (never forced)",
        (*RUN, _refresh, _policy_pack, _platform, _configmap, _status, _every),
        run_stack,
    ),
    Command(
        "remove",
        "delete one key's objects, keep every other key as the stack applied it",
        (*RUN, _refresh, _key(required=True)),
        run_stack,
    ),
    Command(
        "destroy",
        "delete every object of the stack (ownership is checked first)",
        RUN,
        run_stack,
    ),
    Command(
        "diff",
        "what a change does, per key, against a git base (offline: no cluster, no secrets)",
        (_diff_sides, _project_dir, _platform, _format(("markdown", "json"), "markdown")),
        diff,
    ),
)
BY_NAME = {command.name: command for command in COMMANDS}


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
        lambda: _once(args, ctx, stdout, where), watched=_stack_file(args), every=args.every
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
    path = _stack_file(args)
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
