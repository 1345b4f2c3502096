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


def _only_from_the_run_path(operation: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(operation)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__")
        assert caller == RUN_PATH, f"auto.Stack.{operation.__name__} called from {caller}"
        return operation(*args, **kwargs)

    return guarded


@pytest.fixture(autouse=True, scope="session")
def engine_operations_only_through_the_run_path() -> Iterator[None]:
    originals = {name: getattr(auto.Stack, name) for name in ENGINE_OPERATIONS}
    for name, operation in originals.items():
        setattr(auto.Stack, name, _only_from_the_run_path(operation))
    yield
    for name, operation in originals.items():
        setattr(auto.Stack, name, operation)
