"""Suite-wide rules: conformance tests (real binaries, a real API server) get a long timeout;
every other test keeps the short default from pyproject.toml. And what the suite proves is the
path users take: every Pulumi engine operation any test, dev helper or benchmark helper starts
in this process goes through the one run path (``infercrane_pulumi.automation.run``), whatever
starts the process (``subprocess.Popen`` is what every other way ends in), or the test fails.
A person's ``pulumi up`` is one exception: it runs a project that holds its own program
(``__main__.py``), which no driver's workspace does (``automation.project``). The other is a
stand-in ``pulumi`` that the tests of the engine's door start through it on purpose, each named
by ``stand_in_cli``: no engine runs there."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

RUN_PATH = "infercrane_pulumi.automation.run"
ENGINE_OPERATIONS = ("up", "preview", "destroy", "refresh")

CONFORMANCE_TIMEOUT_SECONDS = 600
_STAND_INS: set[Path] = set()


def stand_in_cli(script: Path) -> Path:
    """Name ``script`` a stand-in ``pulumi`` (it runs no engine), which the guard lets start."""
    _STAND_INS.add(script.resolve())
    return script


# pulumi-kubernetes forces its applies over other managers when this is "true". Every test runs
# beside it, as beside a control plane's own variables (issue 39): the runs never pass it to the
# engine, and a person's `pulumi up` refuses it (tests/conformance/test_ambient_kubeconfig.py).
HOSTILE_VARIABLES = {"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"}


def pytest_configure() -> None:
    os.environ.update(HOSTILE_VARIABLES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("conformance") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CONFORMANCE_TIMEOUT_SECONDS))


def engine_operation(args: Any) -> str | None:
    """The engine operation a command line starts (``pulumi up …``), or None."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    if not argv or Path(os.fsdecode(argv[0])).name != "pulumi":
        return None
    verb = next((os.fsdecode(a) for a in argv[1:] if not os.fsdecode(a).startswith("-")), None)
    return verb if verb in ENGINE_OPERATIONS else None


def _stand_in(args: Any) -> bool:
    return Path(os.fsdecode(next(iter(args)))).resolve() in _STAND_INS


def by_a_person(cwd: Any) -> bool:
    """Whether the project in ``cwd`` holds its own program, as a person's does."""
    return cwd is not None and (Path(os.fsdecode(cwd)) / "__main__.py").is_file()


def outside_the_run_path(args: Any, cwd: Any) -> str | None:
    """Why starting ``args`` in ``cwd`` breaks the rule (None: it does not)."""
    verb = engine_operation(args)
    if verb is None or by_a_person(cwd) or _stand_in(args):
        return None
    frame = sys._getframe(1)
    callers = []
    while frame is not None:
        callers.append(frame.f_globals.get("__name__"))
        frame = frame.f_back  # type: ignore[assignment]
    if RUN_PATH in callers:
        return None
    # Named by the first caller that is not a way to start a process.
    plumbing = (__name__, "subprocess", "pulumi.", "asyncio.")
    starter = next((c for c in callers if c and not c.startswith(plumbing)), None)
    return f"pulumi {verb} started outside the run path, from {starter}"


@pytest.fixture(autouse=True, scope="session")
def engine_operations_only_through_the_run_path() -> Iterator[None]:
    original = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        broken = outside_the_run_path(args, kwargs.get("cwd"))
        if broken is not None:
            raise AssertionError(broken)
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]
    yield
    subprocess.Popen.__init__ = original  # type: ignore[method-assign]
