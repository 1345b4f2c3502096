"""Stacks whose backend is a value: what the stack applied, with no Pulumi CLI behind it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from infercrane_pulumi.automation import stacks
from infercrane_pulumi.objects import naming
from infercrane_pulumi.program.records import Applied


class FakeStack:
    """Stands in for ``auto.Stack``: its name, the workspace it was opened in, and a state
    holding a component for each key in ``held`` (the keys the outputs record, unless a test
    says otherwise)."""

    def __init__(self, name: str, project_dir: Path, held: tuple[str, ...] = ()) -> None:
        self.name = name
        self.project_dir = project_dir
        self.held = held

    def set_config(self, *_: Any, **__: Any) -> None:
        raise AssertionError("no secret goes through Pulumi here")

    def export_stack(self) -> SimpleNamespace:
        """The state as ``pulumi stack export`` gives it: its components, by URN."""
        urn = f"urn:pulumi:{self.name}::infercrane::{naming.REPLICA_TYPE}::"
        resources = [
            {"urn": urn + naming.object_name(key), "type": naming.REPLICA_TYPE} for key in self.held
        ]
        return SimpleNamespace(deployment={"resources": resources} if resources else {})


def serve(monkeypatch: pytest.MonkeyPatch, applied: Applied) -> list[FakeStack]:
    """Every stack a driver opens is a ``FakeStack`` whose outputs say ``applied``; returns
    them, in the order they were opened."""
    opened: list[FakeStack] = []

    def open_stack(name: str, *, project_dir: Path, env: Any) -> FakeStack:
        opened.append(FakeStack(name, project_dir, tuple(i.external_key for i in applied.intents)))
        return opened[-1]

    monkeypatch.setattr(stacks, "open_stack", open_stack)
    monkeypatch.setattr(stacks, "applied", lambda _stack: applied)
    return opened
