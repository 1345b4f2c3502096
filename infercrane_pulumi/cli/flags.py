"""The command line's flags: each a function that adds its arguments to one command's parser,
so a command's row in the table (``commands.COMMANDS``) lists what it takes."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from infercrane_pulumi.cli import every

Flags = Callable[[argparse.ArgumentParser], None]


def stack_or_file(command: argparse.ArgumentParser) -> None:
    where = command.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, help="a stack file (Pulumi.<stack>.yaml)")
    where.add_argument("--stack", help="stack name: <project-dir>/stacks/Pulumi.<stack>.yaml")


def stack(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--stack", required=True, help="stack name: <project-dir>/stacks/Pulumi.<stack>.yaml"
    )


def project_dir(command: argparse.ArgumentParser) -> None:
    command.add_argument("--project-dir", default=".", help="where stacks/ is (default: .)")


def backend(command: argparse.ArgumentParser) -> None:
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


def progress(command: argparse.ArgumentParser) -> None:
    command.add_argument("--wait", type=float, default=0.0, help="seconds to wait for a busy stack")
    command.add_argument("--events", action="store_true", help="progress as JSON Lines on stderr")
    command.add_argument(
        "--timeout",
        type=every.period,
        metavar="SECONDS",
        help="stop the engine this long after the run started (run-timeout, retryable: the "
        "next run recovers what it left); default: no deadline",
    )


def refresh(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--refresh",
        action="store_true",
        help="refresh from the cluster first (default: only when it drifted from the stack)",
    )


def policy_pack(command: argparse.ArgumentParser) -> None:
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


def platform(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="the platform's policy, a YAML mapping of infercrane:policy's keys: the stack "
        "file's own infercrane:policy may only tighten it (default: the stack file's alone)",
    )


def named_configmap(flag: str, what: str) -> Flags:
    """A flag naming a ConfigMap of the stack's namespace."""

    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument(flag, metavar="NAME", help=what)

    return add


configmap = named_configmap(
    "--configmap",
    "apply the stack file as ConfigMap NAME of the stack's namespace holds it (under the file's "
    "name), read from the API server once the stack is held and never older than the version "
    "the stack applied; the file itself (the kubelet's copy) only says how to reach the "
    "cluster. Needs `get` on that ConfigMap",
)
status = named_configmap(
    "--status-configmap",
    "after each run, write what it did to ConfigMap NAME of the stack's namespace (server-side "
    "apply, never forced): the stack file's version it applied, each key's change, the last "
    "error (cluster/runstatus.py). Needs `get` and `patch` on it",
)


def every_period(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--every",
        type=every.period,
        metavar="SECONDS",
        help="keep applying the stack file: again as soon as it changes and at least every "
        "SECONDS, one result per run (with --json, one envelope per line), until SIGTERM or "
        "SIGINT, which end the loop after the run in flight",
    )


def key(required: bool) -> Flags:
    def add(command: argparse.ArgumentParser) -> None:
        text = "the external key" if required else "observe one external key only"
        command.add_argument("--key", required=required, help=text)

    return add


def output_format(choices: Sequence[str], default: str) -> Flags:
    def add(command: argparse.ArgumentParser) -> None:
        command.add_argument(
            "--format",
            choices=list(choices),
            default=default,
            help="markdown: the pull-request comment; json: same as --json",
        )

    return add


def diff_sides(command: argparse.ArgumentParser) -> None:
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


RUN = (stack, project_dir, backend, progress)
