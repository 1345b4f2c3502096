"""``make preview STACK=<s> [BASE=<git ref>]``: the engine's preview comment, on a local cluster.

What the pull-request workflow posts for a stack, produced here without a real cluster: a
disposable local control plane stands in for the stack's cluster (its context and namespace are
rewritten to the local provider's), the stack file at ``BASE`` is applied first when given (so
the preview shows the change against it), then the working tree's stack file is previewed
through the same CLI path (``preview --format markdown``) and the comment is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from infercrane_dev import DEPLOY_DIR, REPO_ROOT
from infercrane_dev.localcluster import LocalControlPlane
from infercrane_dev.localcluster.bootstrap import bootstrap_namespace
from infercrane_dev.toolchain import find_binary
from infercrane_pulumi import automation
from infercrane_pulumi.automation.project import write_project
from infercrane_pulumi.cli import entry
from infercrane_pulumi.config.files import parse_stack_text, stack_file
from infercrane_pulumi.config.intents import KUBERNETES_KEY

PASSPHRASE = "infercrane-preview-only"  # protects only this throwaway state


def localized(text: str, *, source: str, context: str) -> tuple[str, str]:
    """The stack file pointed at the local provider identity, and its namespace."""
    config = parse_stack_text(text, source=source)  # refuses an invalid file before any work
    document: dict[str, Any] = yaml.safe_load(text)
    settings = document["config"][KUBERNETES_KEY]
    settings.pop("kubeconfig", None)
    settings["context"] = context
    return yaml.safe_dump({"config": document["config"]}), config.kubernetes.namespace


def run(*, stack: str, base: str | None) -> int:
    relative = stack_file(Path(), stack).as_posix()
    head = (REPO_ROOT / relative).read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="preview-") as scratch, LocalControlPlane() as plane:
        project = write_project(Path(scratch) / "project")
        target = stack_file(project, stack)
        head_file, namespace = localized(head, source=relative, context=plane.provider_context)
        with plane.api_client(plane.admin_context) as admin:
            bootstrap_namespace(admin, namespace, deploy_dir=DEPLOY_DIR)
        env = automation.PulumiEnvironment(
            state_dir=Path(scratch) / "state",
            pulumi_home=REPO_ROOT / ".infercrane" / "pulumi-home",
            passphrase=PASSPHRASE,
            bin_dir=find_binary("pulumi").parent,
            kubeconfig=plane.kubeconfig_path,
        )
        if base is not None:
            shown = subprocess.run(
                ["git", "-C", str(REPO_ROOT), "show", f"{base}:{relative}"],
                capture_output=True,
                text=True,
                check=True,
            )
            target.write_text(
                localized(
                    shown.stdout, source=f"{base}:{relative}", context=plane.provider_context
                )[0]
            )
            automation.run_stack_file(target, env, "up")
        target.write_text(head_file)
        comment = io.StringIO()
        with contextlib.redirect_stderr(io.StringIO()):
            code = entry.main(
                [
                    "preview",
                    "--stack",
                    stack,
                    "--project-dir",
                    str(project),
                    "--format",
                    "markdown",
                ],
                environ=env.variables()
                | {"INFERCRANE_TOOLS_BIN": str(env.bin_dir), "KUBECONFIG": str(env.kubeconfig)},
                stdout=comment,
            )
        sys.stdout.write(comment.getvalue())
        return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infercrane_dev.preview")
    parser.add_argument("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    parser.add_argument("--base", help="git ref whose stack file is applied first")
    args = parser.parse_args(argv)
    return run(stack=args.stack, base=args.base)


if __name__ == "__main__":
    sys.exit(main())
