"""The Pulumi CLI's processes this package starts itself: one engine run's, its display printed
to a terminal or written as its event log, and the one that stores a secret given on stdin
(``set_secret``).

The run's events come from its event log (``events``), never from the CLI's text for a person.
The CLI's human displays (the progress view, the diff view) keep every resource's step, the
resource's whole state twice, until the run ends: with nobody watching, the CLI is asked for its
JSON display, which streams each event and keeps none. Adding one intent to a stack of 1,000, the
CLI's peak RSS fell from 1,173-1,385 MiB to 620-651 MiB that way, its CPU within noise
(benchmarks/results/history-until-2026-12.md, "Performance"). That display is the event log's
very encoding (one engine event a line, engine contract 6), so it is written to the event log's
file in place of ``--event-log``: the CLI converts and encodes every event once, not twice, the
same step's whole state included. With a person watching, the display is theirs, and the CLI
writes the event log itself (``--event-log``, engine contract 3). The SDK's
``PulumiCommand.run`` cannot do either: it keeps all of stdout in memory until the CLI exits
(tens of megabytes of JSON at 1,000 intents).

Every engine run's processes end with it (``marks``): each carries the run's mark, and
whatever still does when the run ends (its plugins, after a CLI killed by a signal) is stopped.
A run given a deadline is cancelled there (SIGINT: the CLI stops its steps and writes its
state), then killed after ``CANCEL_SECONDS`` (``RunTimeoutError``).

A failure is Pulumi's own ``CommandError``, classified from stderr by the SDK as before.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

from pulumi import automation as auto

from infercrane_pulumi.automation.engine import marks
from infercrane_pulumi.errors import RunTimeoutError

Printer = Callable[[str], Any]
# `preview --json` prints one document at the end, holding every step until then, unless asked
# to stream like `up` and `destroy` do.
_STREAM_PREVIEW = {"PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "true"}
# How long a cancelled CLI may take to stop its steps and write its state before it is killed.
CANCEL_SECONDS = 30.0


class Tracker(Protocol):
    """Who keeps a record of the engines started (a stack's lease: ``leases.Lease``)."""

    def started(self, pid: int) -> None: ...

    def ended(self, pid: int) -> None: ...


def run(
    pulumi: auto.PulumiCommand,
    args: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    *,
    on_output: Printer | None,
    event_log: Path,
    deadline: float | None = None,
    tracker: Tracker | None = None,
) -> None:
    """Run ``pulumi args`` in ``cwd`` with ``env`` over this process's environment (as the
    SDK does, but for what ``inherited`` keeps out); its engine events, one a line, to
    ``event_log`` as it works, and its display to ``on_output`` line by line. ``deadline``:
    when (``time.monotonic()``) the run is stopped (``RunTimeoutError``); ``tracker``: told of
    the CLI once started, and once it ended by itself (not killed: its lock went with it)."""
    watched = on_output is not None
    shown = ("--event-log", str(event_log)) if watched else ("--json",)
    command = [pulumi.command, "--non-interactive", *args, *shown]
    environment = {
        **inherited(os.environ),
        **env,
        # The CLI takes --event-log only with PULUMI_DEBUG_COMMANDS.
        **({"PULUMI_DEBUG_COMMANDS": "true"} if watched else _STREAM_PREVIEW),
        "PULUMI_AUTOMATION_API": "true",
    }
    token = secrets.token_hex(16)
    environment[marks.MARK_ENV] = token
    errors: list[str] = []
    expired = threading.Event()
    with (
        event_log.open("wb") as log,
        subprocess.Popen(
            command,
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if watched else log,
            stderr=subprocess.PIPE,
            encoding="utf-8",
        ) as process,
    ):
        timer = None
        if deadline is not None:
            timer = threading.Timer(
                max(0.0, deadline - time.monotonic()), _expire, (process, token, expired)
            )
            timer.start()
        # Both pipes read apart, so that neither fills up while the other is read, and so that
        # this thread waits for the CLI itself: a plugin left running may hold them open.
        display_failed: list[BaseException] = []
        readers = [_reading(_collect, process.stderr, errors)]
        if on_output is not None:
            readers.append(_reading(_show, process.stdout, on_output, display_failed))
        try:
            if tracker is not None:
                tracker.started(process.pid)
            code = process.wait()
        except KeyboardInterrupt:  # Ctrl-C: the CLI, in this group, has it too and stops
            _stopped(process, token)
            raise
        except BaseException:  # a failure of ours: the CLI stopped as Ctrl-C stops it
            _interrupted(process, token)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            marks.stop(marks.MARK_ENV, token)
            for reader in readers:
                reader.join()
        if display_failed:
            raise display_failed[0]
    if tracker is not None and code >= 0:
        tracker.ended(process.pid)
    if expired.is_set():
        raise RunTimeoutError(
            f"{' '.join(args[:1])}: stopped at its deadline; the next run recovers what it left"
        )
    if code != 0:
        result = auto.CommandResult(stdout="", stderr="".join(errors).rstrip(), code=code)
        raise auto.errors.create_command_error(result)


def _expire(process: subprocess.Popen[str], token: str, expired: threading.Event) -> None:
    """The deadline: the CLI cancelled as Ctrl-C cancels it."""
    expired.set()
    _interrupted(process, token)


def _interrupted(process: subprocess.Popen[str], token: str) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        _stopped(process, token)


def _stopped(process: subprocess.Popen[str], token: str) -> None:
    """Once the CLI has had its SIGINT: ``CANCEL_SECONDS`` to stop its steps and write its
    state, then killed with every process of the run."""
    try:
        process.wait(CANCEL_SECONDS)
    except subprocess.TimeoutExpired:
        marks.stop(marks.MARK_ENV, token, grace=0.0)


# Where the command line finds the lease database's URL (password included): read by the
# driver alone (``environment.resolve_environment``), never handed to a process it starts.
LEASE_URL_ENV = "INFERCRANE_LEASE_URL"
NOT_INHERITED = frozenset({"KUBECONFIG", LEASE_URL_ENV})


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """What the CLI, and the plugins it starts, may take from this process's environment: all
    but what decides where and how the provider applies, which the run gives explicitly or not
    at all. pulumi-kubernetes reads ``KUBECONFIG`` for a provider without one, and its
    ``PULUMI_K8S_*`` variables over its defaults (``PULUMI_K8S_ENABLE_PATCH_FORCE`` would let
    it take over fields other managers own): a control plane's own variables are not its runs'.
    Nor is the lease database's URL, whose password only this process's lease needs: the CLI
    and every plugin would otherwise hold it in their environments (``/proc/<pid>/environ``)."""
    return {
        name: value
        for name, value in environ.items()
        if name not in NOT_INHERITED and not name.startswith("PULUMI_K8S_")
    }


def set_secret(
    pulumi: auto.PulumiCommand,
    *,
    stack: str,
    path: str,
    value: str,
    cwd: str,
    env: Mapping[str, str],
) -> None:
    """``pulumi config set --secret --path <path>`` with the value on stdin, never in argv, where
    any local user could read it (``/proc/<pid>/cmdline``) while the command runs. The CLI reads
    stdin when it is not a terminal and drops one trailing newline, which is added here, so the
    value is stored exactly."""
    command = [pulumi.command, "--non-interactive", "config", "set", "--secret", "--path"]
    done = subprocess.run(
        [*command, path, "--stack", stack],
        cwd=cwd,
        env={**inherited(os.environ), **env, "PULUMI_AUTOMATION_API": "true"},
        input=value + "\n",
        capture_output=True,
        encoding="utf-8",
        check=False,
    )
    if done.returncode != 0:
        result = auto.CommandResult(stdout="", stderr=done.stderr.rstrip(), code=done.returncode)
        raise auto.errors.create_command_error(result)


def _reading(target: Callable[..., None], *args: Any) -> threading.Thread:
    reader = threading.Thread(target=target, args=args, daemon=True)
    reader.start()
    return reader


def _collect(stream: TextIO, lines: list[str]) -> None:
    lines.extend(stream)


def _show(stream: TextIO, on_output: Printer, failed: list[BaseException]) -> None:
    """Each line to ``on_output``; what it raised is kept for the run to raise."""
    try:
        for line in stream:
            on_output(line.rstrip())
    except BaseException as failure:
        failed.append(failure)
        stream.close()
