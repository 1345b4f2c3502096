"""Fixtures shared by several unit-test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.gitrepos import two_commit_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return two_commit_repo(tmp_path)
