"""Which starts of a ``pulumi`` binary the suite lets happen, so that what it proves is the path
users take: the engine runs only as the product runs it, through ``engine.process.run`` reached
from the one run path (``infercrane_pulumi.automation.run``). ``tests/conftest.py`` puts this
guard on every start of a process in the suite's own process, before the process starts.

A start is a ``pulumi`` start however it is spelled: the executable itself (any path), behind a
wrapper (``env``, ``nohup``, ``timeout``, ...: any argument naming a ``pulumi`` executable), or in
shell text (``sh -c``, ``shell=True``, ``os.system``, quoted text in an argument, at any depth).
Each ``pulumi`` command line found is judged, and a start passes only if all of them do:

- a workspace command, which starts no engine: the first words after the CLI's own flags are
  one of ``WORKSPACE_COMMANDS`` (the SDK's workspace runs them for the product: versions, stack
  selection, configuration, state export and import), or it asks for ``--help``. Anything else
  is an engine run, the unknown included: a verb this list does not name (``update``, ``import``,
  a newer CLI's), or flags before it this guard cannot parse (a value it cannot tell from the
  verb);
- an engine run started by ``engine.process.run`` itself, on the run path;
- a person's run, started through ``by_a_person``: the tests that run a person's ``pulumi up``
  (or shell) on purpose, each naming the helper where it does so;
- a stand-in ``pulumi`` (it runs no engine), each named by ``stand_in_cli``.

The working directory plays no part. Watched: ``subprocess.Popen`` (which ``subprocess.run``,
asyncio and the SDK end in), ``os.system`` and ``os.posix_spawn[p]``; not the ``exec`` and
``spawn`` families, which nothing in the suite uses; not what a started process starts in turn
(a script file, another Python), which runs outside this process's guard; and not a ``pulumi``
by another name (a renamed copy or link), which nothing in the suite makes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, TypeVar

from infercrane_pulumi.automation.engine import process

RUN_PATH = "infercrane_pulumi.automation.run"
ENGINE = "infercrane_pulumi.automation.engine."
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash"})
# The CLI's own flags (on every command) that take a value, and those that take none.
GLOBAL_VALUE_FLAGS = frozenset(
    {"--cwd", "-C", "--color", "--memprofilerate", "--profiling", "--tracing", "--tracing-header"}
    | {"--verbose", "-v", "--otel-traces"}
)
GLOBAL_SWITCHES = frozenset(
    {"--non-interactive", "--disable-integrity-checking", "--emoji", "-e", "--logflow"}
    | {"--logtostderr", "--fully-qualify-stack-names"}
)
# Commands that start no engine, by their first words: everything the SDK's workspace asks of
# the CLI for the product and the tests (``LocalWorkspace``, ``PulumiCommand``'s version check).
WORKSPACE_COMMANDS = frozenset(
    {("version",), ("about",), ("whoami",), ("cancel",), ("config",), ("plugin",)}
    | {("stack", verb) for verb in ("select", "init", "ls", "output", "export", "import")}
    | {("stack", verb) for verb in ("rm", "tag", "history")}
)
# Shell words that end one command and may begin another.
_SEPARATORS = frozenset({";", "&", "&&", "|", "||", "(", ")", "`"})
_STAND_INS: set[Path] = set()

T = TypeVar("T")


def stand_in_cli(script: Path) -> Path:
    """Name ``script`` a stand-in ``pulumi`` (it runs no engine), which the guard lets start."""
    _STAND_INS.add(script.resolve())
    return script


def by_a_person(
    start: Callable[..., T], args: Sequence[str | os.PathLike[str]], **kwargs: Any
) -> T:
    """``start(args, **kwargs)`` (``subprocess.run`` or ``subprocess.Popen``) as a person's
    shell would: the one way a test runs ``pulumi`` outside the run path on purpose (a person's
    ``pulumi up`` on their own project, the tutorials as written)."""
    return start(args, **kwargs)


def pulumi_commands(
    args: Any, *, shell: bool, executable: Any = None
) -> list[tuple[Path, list[str]]]:
    """Each ``pulumi`` command line a start of ``args`` runs: its executable and its words.
    ``executable``: the program run in place of ``args[0]`` (``Popen``'s, ``posix_spawn``'s path),
    unless ``shell``: then it is the shell."""
    if isinstance(args, (str, bytes, os.PathLike)):
        argv = [os.fsdecode(args)]
    else:
        argv = [os.fsdecode(a) for a in args]
    if not argv:
        return []
    if executable is not None and not shell:
        argv[0] = os.fsdecode(executable)
    if shell or Path(argv[0]).name in SHELLS:
        return [found for text in argv[0 if shell else 1 :] for found in _in_shell_text(text)]
    return _in_words(argv)


def _in_words(words: list[str]) -> list[tuple[Path, list[str]]]:
    found: list[tuple[Path, list[str]]] = []
    for at, word in enumerate(words):
        if Path(word).name == "pulumi":
            found.append((Path(word), words[at + 1 :]))
            break  # what follows is its own arguments
        if any(c.isspace() for c in word):  # quoted text a wrapper may run (`env -S`, `eval`)
            found.extend(_in_shell_text(word))
    return found


def _in_shell_text(text: str) -> list[tuple[Path, list[str]]]:
    lexer = shlex.shlex(text.replace("\n", " ; "), posix=True, punctuation_chars="();<>|&`")
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes: no shell runs it, but judge its bare words anyway
        words = text.split()
    found: list[tuple[Path, list[str]]] = []
    command: list[str] = []
    for word in [*words, ";"]:
        if word in _SEPARATORS:
            found.extend(_in_words(command))
            command = []
        else:
            command.append(word)
    return found


def workspace_command(words: list[str]) -> bool:
    """Whether ``pulumi <words>`` starts no engine (see the module's docstring)."""
    verbs: list[str] = []
    expect_value = False
    for word in words:
        if word == "--":
            break
        if word in ("--help", "-h"):
            return True
        if expect_value:
            expect_value = False
        elif not word.startswith("-"):
            verbs.append(word)
        elif not verbs:  # the CLI's own flags, before the command
            name, has_value, _ = word.partition("=")
            if name in GLOBAL_VALUE_FLAGS:
                expect_value = not has_value
            elif name not in GLOBAL_SWITCHES:
                return False  # a value this guard cannot tell from the verb
    return any(tuple(verbs[: len(c)]) == c for c in WORKSPACE_COMMANDS)


def refusal(
    args: Any,
    *,
    shell: bool,
    executable: Any = None,
    starter: CodeType | None,
    on_run_path: bool,
    named: str | None,
) -> str | None:
    """Why starting ``args`` (``shell``, ``executable``: as ``pulumi_commands`` takes them)
    breaks the rule (None: it does not). ``starter``: the code that started it, past the ways to
    start a process; ``on_run_path``: whether the run path called it; ``named``: who to name in
    the refusal."""
    if starter is by_a_person.__code__:
        return None
    for cli, words in pulumi_commands(args, shell=shell, executable=executable):
        if cli.resolve() in _STAND_INS or workspace_command(words):
            continue
        if starter is process.run.__code__ and on_run_path:
            continue
        said = shlex.join(["pulumi", *words])
        return f"{said} started outside the run path, from {named}"
    return None


def _plumbing(module: str) -> bool:
    """Whether ``module`` starts processes on behalf of its caller: never the one to name."""
    return module in {__name__, "subprocess", "os"} or module.startswith(("pulumi.", "asyncio."))


def _judge(args: Any, *, shell: bool, executable: Any = None) -> None:
    frame: FrameType | None = sys._getframe(2)  # the caller of the guarded function
    modules: list[str] = []
    starter: CodeType | None = None
    while frame is not None:
        module = str(frame.f_globals.get("__name__"))
        modules.append(module)
        exempt = frame.f_code is by_a_person.__code__
        if starter is None and (exempt or not _plumbing(module)):
            starter = frame.f_code
        frame = frame.f_back
    # Named by the first caller that is neither a way to start a process nor the engine's door.
    named = next((m for m in modules if not _plumbing(m) and not m.startswith(ENGINE)), None)
    broken = refusal(
        args,
        shell=shell,
        executable=executable,
        starter=starter,
        on_run_path=RUN_PATH in modules,
        named=named,
    )
    if broken is not None:
        raise AssertionError(broken)


@contextmanager
def guarding() -> Iterator[None]:
    """Every start of a process in this process judged by ``refusal`` while inside."""
    popen_init = subprocess.Popen.__init__
    system, spawn, spawnp = os.system, os.posix_spawn, os.posix_spawnp

    def guarded_popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        _judge(args, shell=bool(kwargs.get("shell")), executable=kwargs.get("executable"))
        popen_init(self, args, *rest, **kwargs)

    def guarded_system(command: Any) -> int:
        _judge(command, shell=True)
        return system(command)

    def guarded_spawn(path: Any, argv: Any, *rest: Any, **kwargs: Any) -> int:
        _judge(argv, shell=False, executable=path)
        return spawn(path, argv, *rest, **kwargs)

    def guarded_spawnp(path: Any, argv: Any, *rest: Any, **kwargs: Any) -> int:
        _judge(argv, shell=False, executable=path)
        return spawnp(path, argv, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded_popen  # type: ignore[method-assign]
    os.system, os.posix_spawn, os.posix_spawnp = guarded_system, guarded_spawn, guarded_spawnp
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        os.system, os.posix_spawn, os.posix_spawnp = system, spawn, spawnp
