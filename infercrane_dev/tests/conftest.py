"""Fixtures of the dev tools' tests: the infercrane-node binaries from the tools bin dir.

Without them the tests that need them skip with the reason printed (``pytest -rs``); with
INFERCRANE_REQUIRE_TOOLS=1 (CI) a missing binary fails instead, as in the conformance suite.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from infercrane_dev.images.catalog import binaries
from infercrane_dev.toolchain import BinaryNotFoundError, find_binary

NODE_BINARIES = (*binaries(), "infercrane-gpu-device-plugin")


@pytest.fixture(scope="session")
def node_bin_dir() -> Path:
    """The directory holding the infercrane-node binaries."""
    try:
        found = [find_binary(name) for name in NODE_BINARIES]
        return found[0].parent
    except BinaryNotFoundError as missing:
        reason = f"infercrane-node binaries missing ({missing}); run `make tools`"
        if os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
