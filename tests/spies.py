"""Every call of a function, whoever makes it and however they reached it. A module that imports
a function by name (``from infercrane_pulumi.objects.workloads import render``) holds the function
object itself: replacing the defining module's attribute, as ``monkeypatch.setattr(workloads,
"render", …)`` does, never sees its calls. So the function object is changed where it is
defined: its code becomes a trampoline to a recorder, which runs a copy of the original."""

from __future__ import annotations

import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest


@dataclass(frozen=True)
class Call:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    result: Any


def spy(monkeypatch: pytest.MonkeyPatch, function: Callable[..., Any]) -> list[Call]:
    """Each call of ``function`` (a function without a closure: module-level) that returns,
    through any reference to it, until ``monkeypatch`` is undone; the list grows as calls
    return, from any thread."""
    assert isinstance(function, types.FunctionType) and function.__closure__ is None, function
    original = types.FunctionType(
        function.__code__, function.__globals__, function.__name__, function.__defaults__
    )
    original.__kwdefaults__ = function.__kwdefaults__
    calls: list[Call] = []

    def record(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        calls.append(Call(args, kwargs, result))
        return result

    # The trampoline finds the recorder in its own keyword default: code swapped into a
    # function keeps that function's globals and may bring no closure.
    monkeypatch.setattr(function, "__code__", _trampoline.__code__)
    monkeypatch.setattr(function, "__defaults__", None)
    monkeypatch.setattr(function, "__kwdefaults__", {"_recorder": record})
    return calls


def _trampoline(*args: Any, _recorder: Callable[..., Any], **kwargs: Any) -> Any:
    return _recorder(*args, **kwargs)
