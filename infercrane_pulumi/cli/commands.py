"""The command line's commands: one table (``COMMANDS``), each row a command's name, help,
flags (``flags``) and handler. Handlers return a ``views.Result`` and never print; ``entry``
renders it and maps an error to its exit code."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
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
from infercrane_pulumi.cli import flags, views
from infercrane_pulumi.cli.flags import Flags
from infercrane_pulumi.cluster import api, doctor
from infercrane_pulumi.config import kubeconfigs
from infercrane_pulumi.config.files import (
    QUIET_SECONDS,
    load_policy_file,
    load_stack_file,
    stack_file,
)
from infercrane_pulumi.config.intents import PolicySettings, StackConfig
from infercrane_pulumi.errors import EXIT_POLICY, ConfigError
from infercrane_pulumi.objects import manifests, workloads
from infercrane_pulumi.review import comments, offline_diff

Connect = Callable[[Any], api.Cluster]


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


def stack_file_of(args: argparse.Namespace) -> Path:
    if getattr(args, "config", None) is not None:
        return Path(args.config)
    return stack_file(Path(args.project_dir), args.stack)


def _config(args: argparse.Namespace) -> StackConfig:
    return load_stack_file(stack_file_of(args))


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
    given = EnvironmentFlags(
        backend_url=args.backend_url,
        lease_url=args.lease_url,
        passphrase_file=args.passphrase_file,
        pulumi_home=args.pulumi_home,
        tools_bin=args.tools_bin,
    )
    return resolve_environment(given, ctx.environ)


def inspect(args: argparse.Namespace, ctx: Context) -> views.Result:
    """Each key as ``NamespaceStack.observe`` judges it: against what the stack applied."""
    keys = None if args.key is None else [args.key]
    found = inspect_stack_file(stack_file_of(args), _environment(args, ctx), ctx.connect, keys)
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
        stack_file_of(args),
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


COMMANDS: tuple[Command, ...] = (
    Command(
        "render",
        "print the exact objects of a stack as YAML (no cluster, no Pulumi)",
        (flags.stack_or_file, flags.project_dir),
        render,
    ),
    Command(
        "doctor",
        "check API, KServe API, every namespaced permission, the Pulumi CLI and plugin; "
        "creates nothing",
        (flags.stack_or_file, flags.project_dir),
        run_doctor,
    ),
    Command(
        "inspect",
        "observe each applied replica: state, reason, objects and their raw conditions",
        (flags.stack_or_file, flags.project_dir, flags.backend, flags.key(required=False)),
        inspect,
    ),
    Command(
        "preview",
        "what `up` would change, per external key (writes nothing)",
        (
            *flags.RUN,
            flags.refresh,
            flags.policy_pack,
            flags.platform,
            flags.configmap,
            flags.output_format(("table", "json", "markdown"), "table"),
        ),
        run_stack,
    ),
    Command(
        "up",
        "apply the stack: ownership preflight, server-side apply (never forced)",
        (
            *flags.RUN,
            flags.refresh,
            flags.policy_pack,
            flags.platform,
            flags.configmap,
            flags.status,
            flags.every_period,
        ),
        run_stack,
    ),
    Command(
        "remove",
        "delete one key's objects, keep every other key as the stack applied it",
        (*flags.RUN, flags.refresh, flags.key(required=True)),
        run_stack,
    ),
    Command(
        "destroy",
        "delete every object of the stack (ownership is checked first)",
        flags.RUN,
        run_stack,
    ),
    Command(
        "diff",
        "what a change does, per key, against a git base (offline: no cluster, no secrets)",
        (
            flags.diff_sides,
            flags.project_dir,
            flags.platform,
            flags.output_format(("markdown", "json"), "markdown"),
        ),
        diff,
    ),
)
BY_NAME = {command.name: command for command in COMMANDS}
