"""Stack files driven like the control plane's stacks: ``Pulumi.<stack>.yaml`` through the one run
path, in a private workspace.

The command line (and the demo, ``make preview`` and the conformance suite, which prove what
it does) runs a stack file the way ``NamespaceStack`` runs its stacks: the generated project
(``project``) in a private temporary workspace, the stack file's document copied into it (its
encryption salt and ``secure:`` values stay valid: they depend on the passphrase only), and
``run.run`` with the file's validated configuration. The file itself is never written. The
stack is the same one in the backend as the repository project's (same project name), so a
person's ``pulumi up`` and these runs share state.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from pulumi import automation as auto

from infercrane_pulumi.automation import project, stacks
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.results import StackResult
from infercrane_pulumi.automation.planning import Operation
from infercrane_pulumi.automation.run import (
    DEFAULT_OPTIONS,
    RunOptions,
    exclusive,
    run,
)
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.intents import (
    KUBERNETES_KEY,
    REPLICAS_KEY,
    STACK_FILE,
    StackConfig,
    parse_stack_config,
    parse_stack_text,
    stack_file,
)


def stack_name(path: Path) -> str:
    match = STACK_FILE.fullmatch(path.name)
    if match is None:
        raise ConfigError(f"{path}: not a stack file (Pulumi.<stack>.yaml)")
    return match["stack"]


def run_stack_file(
    path: Path,
    env: PulumiEnvironment,
    operation: Operation,
    *,
    options: RunOptions = DEFAULT_OPTIONS,
    remove_key: str | None = None,
) -> StackResult:
    """Run ``operation`` on the stack ``path`` configures. With ``remove_key``: an ``up`` of
    the stack's applied intents without that key (the file's pending edits are not applied)."""
    name = stack_name(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror})") from error
    config = parse_stack_text(text, source=str(path))  # all-or-nothing, before anything runs
    document: dict[str, Any] = yaml.safe_load(text)
    with tempfile.TemporaryDirectory(prefix="infercrane-workspace-") as scratch:
        workspace = project.write_project(Path(scratch))
        copy = stack_file(workspace, name)
        copy.write_text(text, encoding="utf-8")
        stack = stacks.open_stack(name, project_dir=workspace, env=env)
        with exclusive(env, name, options.wait_seconds):  # what it reads stays true
            if isinstance(document["config"][KUBERNETES_KEY].get("kubeconfig"), dict):
                # Encrypted contents: this process reads the cluster with them too, as the
                # program will (and so the program knows its preflight has run).
                config = _with_kubeconfig(stack, document, config)
            applied = stacks.applied(stack)
            if remove_key is not None:
                kept = [i for i in applied.intents if i.external_key != remove_key]
                document["config"][REPLICAS_KEY] = [
                    i.model_dump(mode="json", by_alias=True) for i in kept
                ]
                copy.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
                config = config.model_copy(update={"replicas": tuple(kept)})
            return run(stack, env, operation, config, applied=applied, options=options)


def _with_kubeconfig(stack: auto.Stack, document: Any, config: StackConfig) -> StackConfig:
    with stacks.pulumi_errors(stack.name):
        contents = stack.get_config(f"{KUBERNETES_KEY}.kubeconfig", path=True).value
    settings = config.kubernetes.model_dump(mode="json", by_alias=True, exclude_none=True)
    replicas = document["config"].get(REPLICAS_KEY)
    return parse_stack_config(settings | {"kubeconfig": contents}, replicas)
