"""The Automation API: how the InferCrane control plane, the demo and the tests drive stacks.

The only importer of ``pulumi.automation``. It runs the same program as ``pulumi up`` (the
project's ``__main__.py`` through the Python language host), always refreshes first so drift
is visible, and recovers by itself from a run that died: a stale lock left by a dead process on
this host is cancelled and interrupted operations are cleared, which is safe because every
object is re-applied idempotently under names derived from durable keys.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi.errors import (
    ClusterUnavailableError,
    ConfigError,
    InferCraneError,
    OwnershipError,
    RejectedError,
)
from infercrane_pulumi.program import REFUSAL_HEADLINE

PROJECT_NAME = "infercrane"
Printer = Callable[[str], Any]


class RunFailedError(InferCraneError):
    """A Pulumi operation failed; the engine's own diagnostics were streamed to the caller."""

    code = "pulumi-run-failed"


@dataclass(frozen=True)
class PulumiEnvironment:
    """Where state, plugins and binaries live; nothing here comes from the user's shell."""

    state_dir: Path
    pulumi_home: Path
    passphrase: str
    bin_dir: Path | None = None
    kubeconfig: Path | None = None

    def variables(self) -> dict[str, str]:
        variables = {
            "PULUMI_BACKEND_URL": self.state_dir.resolve().as_uri(),
            "PULUMI_CONFIG_PASSPHRASE": self.passphrase,
            "PULUMI_HOME": str(self.pulumi_home.resolve()),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Use the installed, version-pinned plugin, never a same-named binary on PATH.
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
        }
        if self.bin_dir is not None:
            variables["PATH"] = os.pathsep.join([str(self.bin_dir), os.environ.get("PATH", "")])
        if self.kubeconfig is not None:
            variables["KUBECONFIG"] = str(self.kubeconfig)
        return variables


def open_stack(name: str, *, project_dir: Path, env: PulumiEnvironment) -> auto.Stack:
    """Create or select stack ``name`` of the project in ``project_dir`` on the file backend."""
    env.state_dir.mkdir(parents=True, exist_ok=True)
    command = None
    if env.bin_dir is not None:
        command = auto.PulumiCommand(root=str(env.bin_dir.parent))
    options = auto.LocalWorkspaceOptions(
        work_dir=str(project_dir), env_vars=env.variables(), pulumi_command=command
    )
    stack = auto.create_or_select_stack(name, work_dir=str(project_dir), opts=options)
    recover(stack, env)
    return stack


def stale_locks(env: PulumiEnvironment, stack_name: str) -> list[Path]:
    """Lock files of this stack whose process is gone from this host (a SIGKILLed run)."""
    lock_root = env.state_dir / ".pulumi" / "locks"
    stale = []
    for lock in lock_root.glob(f"**/{PROJECT_NAME}/{stack_name}/*.json"):
        content = json.loads(lock.read_text() or "{}")
        if content.get("hostname") == socket.gethostname() and not _alive(int(content["pid"])):
            stale.append(lock)
    return stale


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(stack: auto.Stack, env: PulumiEnvironment) -> list[str]:
    """Undo what a dead run left behind; returns what was done, for the caller's log."""
    done = []
    locks = stale_locks(env, stack.name)
    if locks:
        stack.cancel()
        done.append(f"cancelled {len(locks)} stale lock(s) of dead process(es)")
    exported = stack.export_stack()
    deployment = dict(exported.deployment or {})
    pending = deployment.get("pending_operations")
    if pending:
        deployment["pending_operations"] = []
        stack.import_stack(auto.Deployment(version=exported.version, deployment=deployment))
        done.append(f"cleared {len(pending)} interrupted operation(s); the next run re-applies")
    return done


def _run(operation: Callable[..., Any], on_output: Printer | None, **kwargs: Any) -> Any:
    try:
        return operation(color="never", on_output=on_output, refresh=True, **kwargs)
    except auto.errors.CommandError as error:
        raise classify(str(error)) from error


def classify(output: str) -> InferCraneError:
    """The typed error for a failed run, from the ``[code]`` the program's refusal carries."""
    lines = [line.strip() for line in output.splitlines()]
    problems, listing = [], False
    for line in lines:
        if listing and line.startswith("- "):
            problems.append(line.removeprefix("- "))
        else:
            listing = line.endswith(REFUSAL_HEADLINE)
    errors = [line for line in lines if line.startswith("error:")]
    summary = list(dict.fromkeys(problems or errors)) or [
        "pulumi operation failed (see its output)"
    ]
    if f"[{ConfigError.code}]" in output:
        return ConfigError(summary)
    if f"[{OwnershipError.code}]" in output:
        return OwnershipError(summary)
    if f"[{RejectedError.code}]" in output:
        return RejectedError("\n".join(summary))
    if f"[{ClusterUnavailableError.code}]" in output or "connection refused" in output:
        return ClusterUnavailableError("\n".join(summary))
    return RunFailedError("\n".join(summary))


def preview(stack: auto.Stack, on_output: Printer | None = None) -> auto.PreviewResult:
    result: auto.PreviewResult = _run(stack.preview, on_output, diff=True)
    return result


def up(stack: auto.Stack, on_output: Printer | None = None) -> auto.UpResult:
    result: auto.UpResult = _run(stack.up, on_output)
    return result


def destroy(stack: auto.Stack, on_output: Printer | None = None) -> auto.DestroyResult:
    # Running the program makes the ownership preflight run before anything is deleted.
    result: auto.DestroyResult = _run(stack.destroy, on_output, run_program=True)
    return result
