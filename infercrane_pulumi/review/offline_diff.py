"""``diff --base <ref>``: what a change does to each stack, computed from the repository alone.

A fork's pull request gets no secrets, and a reviewer should not need cluster credentials to see
what a change does. So both sides are rendered from files: the stack file at the base revision
and in the working tree, each through ``workloads.stack_objects`` (the very objects the engine
would apply), then compared per external key (``changes``). When the program itself changed
since the base (any file under the package differs), the base's objects come from the base's
own code: its files are exported to a scratch directory and its ``render --json`` runs there in
a subprocess (that envelope is stable across versions). Otherwise the running code renders both.

Both sides are also judged by the stack's policy (``policy.rules``, the running code's rules,
each side under its own ``infercrane:policy``), so the comment says which violations the change
brings and which it fixes, for forks too.

A stack file absent at base means every intent is created; absent at head, every intent is
deleted (and the comment says so loudly). Neither is an error. A ref that names no commit, a
directory that is no git repository, or an invalid stack file on either side is a
``ConfigError``, each problem one line naming its side ("base <ref>:" or "head:").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

import yaml

from infercrane_pulumi.config.files import STACK_FILE, parse_stack_text
from infercrane_pulumi.config.intents import POLICY_KEY, PolicySettings, StackConfig
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.policy.rules import Finding, evaluate_stack
from infercrane_pulumi.review import changes, comments
from infercrane_pulumi.review.gitrepo import Repository, open_repository

PACKAGE = __name__.split(".")[0]
PROJECT_FILE = "Pulumi.yaml"
TITLE = "### InferCrane offline diff"
RENDER_TIMEOUT_SECONDS = 300

Render = Callable[[str, str], list[Manifest]]  # (stack file path, its text) -> objects


def diff_command(
    *,
    base: str,
    configs: Sequence[Path] | None,
    repo: Path,
    platform: PolicySettings | None = None,
) -> tuple[list[changes.StackChanges], str]:
    """Diff each stack file between ``base`` and the working tree of the repository at
    ``repo``: (each stack's change, one Markdown comment).

    ``configs`` are stack files (relative ones to ``repo``); None means every
    ``Pulumi.*.yaml`` of the project's stack directory at base or at head. ``platform``: the
    platform's policy both sides are judged by too (``--policy``), which a change to a stack
    file's own cannot loosen.
    """
    git = open_repository(repo)
    commit = git.commit(base)
    if commit is None:
        raise ConfigError(f"base {base}: no such commit in {git.root}")
    project, stack_dir = _project(git.root)
    if configs is None:
        paths = _stack_files(git, commit, stack_dir)
    else:
        paths = [_relative(git.root, repo, config) for config in configs]
    notes = [] if platform is None else ["Both sides are judged by the platform's policy too."]
    with tempfile.TemporaryDirectory(prefix="infercrane-diff-") as scratch:
        render_base: Render = _render
        if git.differs(commit, PACKAGE):
            notes.append(
                f"The program changed since base {base}: the base is rendered with its own code."
            )
            render_base = _base_code_renderer(git, commit, paths, Path(scratch))
        stacks = _compare_all(
            git,
            commit,
            paths,
            base=base,
            project=project,
            notes=notes,
            render_base=render_base,
            platform=platform,
        )
    intro = (
        f"Base {comments.code(base)} ({comments.code(commit[:12])}) compared with the working "
        "tree, rendered offline: no cluster, no credentials."
    )
    return stacks, comments.comment(stacks, title=TITLE, intro=[intro])


def _project(root: Path) -> tuple[str, str]:
    """The project's name and stack directory (relative to ``root``), from ``Pulumi.yaml``."""
    try:
        document = yaml.safe_load((root / PROJECT_FILE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"head: {PROJECT_FILE}: cannot read a project ({error})") from error
    name = document.get("name") if isinstance(document, dict) else None
    if not isinstance(name, str):
        raise ConfigError(f"head: {PROJECT_FILE}: name: is required")
    stack_dir = str(document.get("stackConfigDir") or ".")
    return name, PurePosixPath(stack_dir).as_posix()


def _stack_files(git: Repository, commit: str, stack_dir: str) -> list[str]:
    at_head = {
        path.relative_to(git.root).as_posix()
        for path in (git.root / stack_dir).glob("Pulumi.*.yaml")
    }
    at_base = {p for p in git.files(commit, stack_dir) if STACK_FILE.fullmatch(Path(p).name)}
    if not at_head | at_base:
        raise ConfigError(f"{stack_dir}: no Pulumi.<stack>.yaml at base or at head")
    return sorted(at_head | at_base)


def _relative(root: Path, repo: Path, config: Path) -> str:
    absolute = (config if config.is_absolute() else repo / config).resolve()
    try:
        relative = absolute.relative_to(root.resolve()).as_posix()
    except ValueError as error:
        raise ConfigError(f"{config}: not inside the repository {root}") from error
    if not STACK_FILE.fullmatch(PurePosixPath(relative).name):
        raise ConfigError(f"{config}: not a stack file (Pulumi.<stack>.yaml)")
    return relative


def _render(path: str, text: str) -> list[Manifest]:
    return workloads.stack_objects(parse_stack_text(text, source=path))


def _compare_all(
    git: Repository,
    commit: str,
    paths: Sequence[str],
    *,
    base: str,
    project: str,
    notes: Sequence[str],
    render_base: Render,
    platform: PolicySettings | None,
) -> list[changes.StackChanges]:
    """Every stack compared, or one ``ConfigError`` with every problem of every side."""
    problems: list[str] = []
    stacks = []
    for path in paths:
        base_text = git.read(commit, path)
        head_text = _head_text(git.root / path, path)
        if base_text is None and head_text is None:
            problems.append(f"{path}: absent at base {base} and at head")
            continue
        old = _side(f"base {base}", path, base_text, render_base, problems)
        new = _side("head", path, head_text, _render, problems)
        stack_notes = list(notes)
        head_config, base_config = _config(path, head_text), _config(path, base_text)
        if base_text is not None and base_config is None:
            stack_notes.append(
                f"The base's {path} does not validate with this code: every policy finding at "
                "head is listed as new."
            )
        elif base_config and head_config and base_config.policy != head_config.policy:
            stack_notes.append(f"{path} changes {POLICY_KEY}: each side is judged by its own.")
        if base_text is None:
            stack_notes.append(f"{path} is new since base {base}: every intent is created.")
        if head_text is None:
            stack_notes.append(f"{path} is deleted: every intent's objects are deleted.")
        match = STACK_FILE.fullmatch(PurePosixPath(path).name)
        assert match is not None  # every path was checked to be a stack file
        stacks.append(
            changes.stack_changes(
                operation="diff",
                project=project,
                stack=match["stack"],
                old=old,
                new=new,
                notes=stack_notes,
                policy=changes.policy_findings(
                    _findings(head_config, platform), _findings(base_config, platform)
                ),
            )
        )
    if problems:
        raise ConfigError(problems)
    return stacks


def _config(path: str, text: str | None) -> StackConfig | None:
    """The side's configuration as the running code reads it (None: absent, or invalid, which
    ``_side`` reports for the side it renders)."""
    if text is None:
        return None
    try:
        return parse_stack_text(text, source=path)
    except ConfigError:
        return None


def _findings(config: StackConfig | None, platform: PolicySettings | None) -> tuple[Finding, ...]:
    return () if config is None else evaluate_stack(config, platform)


def _head_text(file: Path, path: str) -> str | None:
    if not file.exists():
        return None
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"head: {path}: cannot read ({error})") from error


def _side(
    side: str, path: str, text: str | None, render: Render, problems: list[str]
) -> list[Manifest]:
    if text is None:
        return []
    try:
        return render(path, text)
    except ConfigError as error:
        # Problems about the whole file name it already; field problems get it here.
        problems += [f"{side}: {path}: {p.removeprefix(f'{path}: ')}" for p in error.problems]
        return []


def _base_code_renderer(
    git: Repository, commit: str, paths: Sequence[str], scratch: Path
) -> Render:
    """Render with the code at ``commit``: its package and stack files exported to
    ``scratch``, its command line run there (first on the import path)."""
    present = [path for path in paths if git.read(commit, path) is not None]
    git.export(commit, [PACKAGE, *present], scratch)
    path_entries = [str(scratch), os.environ.get("PYTHONPATH", "")]
    env = os.environ | {"PYTHONPATH": os.pathsep.join(p for p in path_entries if p)}

    def render(path: str, _text: str) -> list[Manifest]:  # the exported file is that text
        done = subprocess.run(
            [sys.executable, "-m", PACKAGE, "render", "--config", path, "--json"],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=RENDER_TIMEOUT_SECONDS,
        )
        try:
            envelope = json.loads(done.stdout)
        except ValueError:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ConfigError(
                f"the program at base failed to render (exit {done.returncode}): {last}"
            ) from None
        if not envelope.get("ok"):
            raise ConfigError(envelope.get("error", {}).get("problems") or ["render failed"])
        result: list[Manifest] = envelope["result"]
        return result

    return render
