"""Stacks whose backend is a value: what the stack applied, with no Pulumi CLI behind it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from infercrane_pulumi.automation import stacks
from infercrane_pulumi.records import Applied


class FakeStack:
    """Stands in for ``auto.Stack``: its name and the workspace it was opened in."""

    def __init__(self, name: str, project_dir: Path) -> None:
        self.name = name
        self.project_dir = project_dir

    def set_config(self, *_: Any, **__: Any) -> None:
        raise AssertionError("no secret goes through Pulumi here")


def serve(monkeypatch: pytest.MonkeyPatch, applied: Applied) -> list[FakeStack]:
    """Every stack a driver opens is a ``FakeStack`` whose outputs say ``applied``; returns
    them, in the order they were opened."""
    opened: list[FakeStack] = []

    def open_stack(name: str, *, project_dir: Path, env: Any) -> FakeStack:
        opened.append(FakeStack(name, project_dir))
        return opened[-1]

    monkeypatch.setattr(stacks, "open_stack", open_stack)
    monkeypatch.setattr(stacks, "applied", lambda _stack: applied)
    return opened
