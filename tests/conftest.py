"""Suite-wide rules: conformance tests (real binaries, a real API server) get a long timeout;
every other test keeps the short default from pyproject.toml. And what the suite proves is the
path users take: every engine operation of every test goes through the one run path
(``infercrane_pulumi.automation.run``), or the test fails."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pulumi import automation as auto

RUN_PATH = "infercrane_pulumi.automation.run"
ENGINE_OPERATIONS = ("up", "preview", "destroy", "refresh")

CONFORMANCE_TIMEOUT_SECONDS = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("conformance") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CONFORMANCE_TIMEOUT_SECONDS))


def _only_from_the_run_path(run: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(run)
    def guarded(self: Any, args: list[str], *rest: Any, **kwargs: Any) -> Any:
        verb = next((arg for arg in args if not arg.startswith("-")), None)
        if verb in ENGINE_OPERATIONS:
            caller = sys._getframe(1).f_globals.get("__name__")
            assert caller == RUN_PATH, f"pulumi {verb} started from {caller}"
        return run(self, args, *rest, **kwargs)

    return guarded


@pytest.fixture(autouse=True, scope="session")
def engine_operations_only_through_the_run_path() -> Iterator[None]:
    """Every Pulumi CLI process the suite starts for an engine operation comes from the run
    path (``auto.Stack.up`` and friends, too, end in ``PulumiCommand.run``)."""
    original = auto.PulumiCommand.run
    auto.PulumiCommand.run = _only_from_the_run_path(original)  # type: ignore[method-assign]
    yield
    auto.PulumiCommand.run = original  # type: ignore[method-assign]
