"""Opening a stack and running ``preview``/``up``/``destroy`` on it, with typed failures.

Every operation refreshes first (drift is visible), runs the project's program through the
Pulumi CLI and language host, and ends either with the engine's result or with one of the
project's errors: the program's own refusal read from the refusal channel, ``StackBusyError``
when another operation holds the stack, else ``RunFailedError`` with the engine's error
diagnostics (taken from its event stream, not from its text output). Operations on one stack
are serialized within this process; across processes Pulumi's stack lock decides, and a caller
may wait for it up to a deadline.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi import refusals
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.locks import stack_locks
from infercrane_pulumi.automation.recovery import recover
from infercrane_pulumi.errors import ConfigError, RunFailedError, StackBusyError

Printer = Callable[[str], Any]
EventHandler = Callable[[auto.EngineEvent], Any]
MAX_PROBLEMS = 10
LOCK_POLL_SECONDS = 0.5

_guards: dict[tuple[str, str], threading.RLock] = {}
_guards_lock = threading.Lock()


@contextlib.contextmanager
def pulumi_errors(stack_name: str) -> Iterator[None]:
    """Map Pulumi's own exceptions to the project's errors (command failures: see ``_run``)."""
    try:
        yield
    except auto.errors.ConcurrentUpdateError as error:
        raise StackBusyError(f"stack {stack_name}: another operation holds its lock") from error
    except (auto.errors.StackNotFoundError, auto.errors.StackAlreadyExistsError) as error:
        raise ConfigError(f"stack {stack_name}: {error.name}") from error
    except auto.errors.CommandError as error:
        raise RunFailedError(f"stack {stack_name}: pulumi command failed") from error
    except (auto.errors.InvalidVersionError, FileNotFoundError) as error:
        raise ConfigError(f"Pulumi CLI: {error}") from error


def open_stack(name: str, *, project_dir: Path, env: PulumiEnvironment) -> auto.Stack:
    """Create or select stack ``name`` of the project in ``project_dir`` on ``env``'s backend."""
    if env.state_dir is not None:
        env.state_dir.mkdir(parents=True, exist_ok=True)
    command = None
    if env.bin_dir is not None:
        command = auto.PulumiCommand(root=str(env.bin_dir.parent))
    options = auto.LocalWorkspaceOptions(
        work_dir=str(project_dir), env_vars=env.variables(), pulumi_command=command
    )
    with pulumi_errors(name):
        return auto.create_or_select_stack(name, work_dir=str(project_dir), opts=options)


def serialized(env: PulumiEnvironment, stack_name: str) -> threading.RLock:
    """The in-process lock of one stack: hold it across writing config and running."""
    with _guards_lock:
        return _guards.setdefault((env.backend, stack_name), threading.RLock())


def _wait_until_free(env: PulumiEnvironment, stack_name: str, wait_seconds: float) -> None:
    deadline = time.monotonic() + wait_seconds
    while any(not lock.stale for lock in stack_locks(env.local_state, stack_name)):
        if time.monotonic() >= deadline:
            raise StackBusyError(
                f"stack {stack_name}: another operation holds its lock"
                + (f" (waited {wait_seconds:.0f}s)" if wait_seconds else "")
            )
        time.sleep(LOCK_POLL_SECONDS)


def run(
    stack: auto.Stack,
    env: PulumiEnvironment,
    operation: str,
    *,
    on_output: Printer | None = None,
    on_event: EventHandler | None = None,
    wait_seconds: float = 0.0,
    refresh: bool = True,
    **options: Any,
) -> Any:
    """Run ``stack.<operation>`` (preview, up, destroy), raising typed errors.

    What a dead run left behind is recovered first. A busy stack raises ``StackBusyError`` at
    once, or after ``wait_seconds`` of waiting.
    """
    deadline = time.monotonic() + wait_seconds
    options = options | {"refresh": refresh}
    with serialized(env, stack.name):
        with pulumi_errors(stack.name):
            recover(stack, env)
        while True:
            _wait_until_free(env, stack.name, max(0.0, deadline - time.monotonic()))
            try:
                return _attempt(
                    stack,
                    operation,
                    on_output=on_output,
                    on_event=on_event,
                    options=options,
                )
            except StackBusyError:
                # Another process took the lock between our look and our start.
                if time.monotonic() >= deadline:
                    raise


def _attempt(
    stack: auto.Stack,
    operation: str,
    *,
    on_output: Printer | None,
    on_event: EventHandler | None,
    options: dict[str, Any],
) -> Any:
    diagnostics: list[str] = []

    def collect(event: auto.EngineEvent) -> None:
        diagnostic = event.diagnostic_event
        if diagnostic is not None and diagnostic.severity == "error":
            diagnostics.extend(line.strip() for line in diagnostic.message.splitlines())
        if on_event is not None:
            on_event(event)

    # One private directory per run (0700), removed with it: the refusal channel, and the
    # run's TMPDIR, because pulumi-kubernetes writes the whole kubeconfig (credentials
    # included) to a temporary file for Helm on every configure and never removes it.
    run_dir = Path(tempfile.mkdtemp(prefix="infercrane-run-"))
    refusal_file = run_dir / "refusal.json"
    workspace = stack.workspace
    variables = workspace.env_vars
    workspace.env_vars = {
        **variables,
        refusals.REFUSAL_FILE_ENV: str(refusal_file),
        "TMPDIR": str(run_dir),
    }
    try:
        with pulumi_errors(stack.name):
            try:
                return getattr(stack, operation)(
                    color="never", on_output=on_output, on_event=collect, **options
                )
            except auto.errors.CommandError as error:
                if isinstance(error, auto.errors.ConcurrentUpdateError):
                    raise
                refused = refusals.take(refusal_file)
                if refused is not None:
                    raise refused from error
                raise _failed(stack.name, operation, diagnostics) from error
    finally:
        workspace.env_vars = variables
        shutil.rmtree(run_dir, ignore_errors=True)


def _failed(stack_name: str, operation: str, diagnostics: list[str]) -> RunFailedError:
    lines = [line[:300] for line in dict.fromkeys(diagnostics) if line][:MAX_PROBLEMS]
    return RunFailedError(lines or [f"stack {stack_name}: pulumi {operation} failed"])


# How each operation runs. Destroy runs the program, so the ownership preflight runs before
# anything is deleted.
OPERATION_OPTIONS: dict[str, dict[str, Any]] = {
    "preview": {"diff": True},
    "up": {},
    "destroy": {"run_program": True},
}


def preview(stack: auto.Stack, env: PulumiEnvironment, **options: Any) -> auto.PreviewResult:
    result: auto.PreviewResult = run(
        stack, env, "preview", **OPERATION_OPTIONS["preview"], **options
    )
    return result


def up(stack: auto.Stack, env: PulumiEnvironment, **options: Any) -> auto.UpResult:
    result: auto.UpResult = run(stack, env, "up", **options)
    return result


def destroy(stack: auto.Stack, env: PulumiEnvironment, **options: Any) -> auto.DestroyResult:
    result: auto.DestroyResult = run(
        stack, env, "destroy", **OPERATION_OPTIONS["destroy"], **options
    )
    return result
