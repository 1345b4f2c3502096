"""Suite-wide rules: conformance tests (real binaries, a real API server) get a long timeout;
every other test keeps the short default from pyproject.toml."""

from __future__ import annotations

import pytest

CONFORMANCE_TIMEOUT_SECONDS = 600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("conformance") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CONFORMANCE_TIMEOUT_SECONDS))
