"""One engine run: the Pulumi CLI started for one operation, the program served to it from this
process, its events read from its event log as it writes them.

How the run went is told by its events and its exit, never its text, as an ``Outcome``: what it
means (a refusal, a policy violation, a failure to record) is the run path's to say. The CLI
is called directly (``process``): the Automation API's ``Stack.up`` and friends read the
stack's outputs (twice) and its history after every run, three more CLI processes this path
never uses, and keep all the CLI prints in memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi import private_dirs
from infercrane_pulumi.automation.engine import events, process, serving

EventHandler = Callable[[auto.EngineEvent], Any]


@dataclass(frozen=True)
class Outcome:
    """How one engine run ended."""

    failed: bool = False
    busy: bool = False  # the CLI found the stack locked by another operation
    # The engine's error diagnostics, one line each, as it wrote them (credentials unmasked).
    diagnostics: tuple[str, ...] = ()
    finished: bool = False  # it reported its summary: it ran every step
    policy: tuple[auto.PolicyEvent, ...] = ()  # what the policy packs reported


# A run's private directory: its event log, and its TMPDIR (``operate``).
RUN_DIR_PREFIX = "infercrane-run-"
# The file backend's CLI reads every other lock of the stack before it runs: one whose holder
# released it between the listing and the read fails the run with the blob's NotFound, where a
# moment earlier it would have said "locked" (pulumi/pkg/backend/diy/lock.go, checkForLock).
_VANISHED_LOCK = re.compile(r'blob \(key "[^"]*\.pulumi/locks/[^"]*"\) \(code=NotFound\)')


def busy(error: auto.errors.CommandError) -> bool:
    """Another operation holds the stack, or held it a moment ago: the run may be retried."""
    return isinstance(error, auto.errors.ConcurrentUpdateError) or bool(
        _VANISHED_LOCK.search(str(error))
    )


def cli_version(stack: auto.Stack) -> str:
    """The version of the CLI the stack's runs use, for what is said about its behaviour."""
    version = stack.workspace.pulumi_command.version
    return "(unknown version)" if version is None else f"v{version}"


def operate(
    stack: auto.Stack,
    arguments: Sequence[str],
    program: Callable[[], None],
    *,
    on_event: EventHandler,
    on_output: process.Printer | None = None,
    unread: frozenset[str] = frozenset(),
    variables: Mapping[str, str] | None = None,
    deadline: float | None = None,
    tracker: process.Tracker | None = None,
) -> Outcome:
    """Run ``pulumi <arguments>`` on ``stack`` with ``program`` served to it; every event to
    ``on_event`` as it comes but the ``same`` steps of ``unread`` URNs. ``variables``: more
    environment for the CLI and its plugins; ``deadline``: when the run is stopped, and
    ``tracker``: told of the CLI's start and end (``process.run``). The run gets a private
    directory (its event log, and its TMPDIR, because pulumi-kubernetes writes the whole
    kubeconfig to a temporary file on every configure and never removes it)."""
    diagnostics: list[str] = []
    finished: list[auto.EngineEvent] = []
    judged: list[auto.PolicyEvent] = []

    def collect(event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            judged.append(event.policy_event)
        diagnostic = event.diagnostic_event
        if diagnostic is not None and diagnostic.severity == "error":
            diagnostics.extend(line.strip() for line in diagnostic.message.splitlines())
        if event.summary_event is not None:
            finished.append(event)
        on_event(event)

    # Removed when the run ends; if the driver is killed, by its next run on this host.
    run_dir = private_dirs.made(RUN_DIR_PREFIX)
    event_log = run_dir / "events.jsonl"
    workspace = stack.workspace
    environment = {
        **workspace.env_vars,
        **(variables or {}),
        "TMPDIR": str(run_dir),
    }
    tail = events.Tail(event_log, collect, unread, cli=cli_version(stack))
    try:
        with serving.serving(program, run_dir) as served:
            command = [
                *arguments,
                *served,
                *("--color", "never", "--stack", stack.name),
            ]
            try:
                process.run(
                    workspace.pulumi_command,
                    command,
                    workspace.work_dir,
                    environment,
                    on_output=on_output,
                    event_log=event_log,
                    deadline=deadline,
                    tracker=tracker,
                )
            except auto.errors.CommandError as error:
                tail.close()  # every event read before saying how it ended
                return Outcome(
                    failed=True,
                    busy=busy(error),
                    diagnostics=tuple(diagnostics),
                    finished=bool(finished),
                    policy=tuple(judged),
                )
        tail.close()
        return Outcome(finished=bool(finished), policy=tuple(judged))
    finally:
        tail.close()
        private_dirs.removed(run_dir)
