"""One engine run's Pulumi CLI process, its display printed to a terminal or discarded.

The run's events come from its event log (``eventlog``), never from what the CLI prints, so
what the CLI prints is only for a person. The CLI's human displays (the progress view, the
diff view) keep every resource's step, the resource's whole state twice, until the run ends:
with nobody watching, the CLI is asked for its JSON display, which streams each event and
keeps none, and its stdout is discarded. Adding one intent to a stack of 1,000, the CLI's
peak RSS fell from 1,173-1,385 MiB to 620-651 MiB that way, its CPU within noise (README,
"Performance"). The SDK's ``PulumiCommand.run`` cannot discard: it keeps all of stdout in
memory until the CLI exits (tens of megabytes of JSON at 1,000 intents).

A failure is Pulumi's own ``CommandError``, classified from stderr by the SDK as before.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from pulumi import automation as auto

Printer = Callable[[str], Any]
# `preview --json` prints one document at the end, holding every step until then, unless asked
# to stream like `up` and `destroy` do.
_STREAM_PREVIEW = {"PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "true"}


def run(
    pulumi: auto.PulumiCommand,
    args: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    on_output: Printer | None,
) -> None:
    """Run ``pulumi args`` in ``cwd`` with ``env`` over this process's environment (as the
    SDK does); its display to ``on_output`` line by line, or nowhere."""
    watched = on_output is not None
    command = [pulumi.command, "--non-interactive", *args, *(() if watched else ("--json",))]
    environment = {
        **os.environ,
        **env,
        **({} if watched else _STREAM_PREVIEW),
        "PULUMI_AUTOMATION_API": "true",
    }
    errors: list[str] = []
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if watched else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        encoding="utf-8",
    ) as process:
        assert process.stderr is not None
        # Read apart, so that neither pipe fills up while the other is read.
        reader = threading.Thread(target=_collect, args=(process.stderr, errors), daemon=True)
        reader.start()
        if on_output is not None:
            assert process.stdout is not None
            for line in process.stdout:
                on_output(line.rstrip())
        reader.join()
        code = process.wait()
    if code != 0:
        result = auto.CommandResult(stdout="", stderr="".join(errors).rstrip(), code=code)
        raise auto.errors.create_command_error(result)


def _collect(stream: TextIO, lines: list[str]) -> None:
    lines.extend(stream)
