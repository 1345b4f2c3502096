"""The project's error hierarchy and its wire form.

Every failure a user can see is one of these classes: a stable ``code``, a ``retryable`` flag
(invalid input and refusals are permanent; an unreachable cluster or a busy stack is not) and
``problems``, one line each, starting with their subject. Messages never carry credentials or
raw client output. ``to_record``/``from_record`` carry an error across a process boundary (the
Pulumi program to the Automation API, the CLI to another language) as data, decoded through
one ``{code: class}`` registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar


class InferCraneError(Exception):
    """Root of every error this project raises on purpose."""

    code: ClassVar[str] = "infercrane-error"
    retryable: ClassVar[bool] = False

    def __init__(self, problems: Sequence[str] | str) -> None:
        self.problems: tuple[str, ...] = (
            (problems,) if isinstance(problems, str) else tuple(problems)
        )
        super().__init__("; ".join(self.problems))

    def to_record(self) -> dict[str, Any]:
        return {"code": self.code, "retryable": self.retryable, "problems": list(self.problems)}


class ConfigError(InferCraneError):
    """The configuration is invalid; nothing was sent to any API."""

    code = "invalid-config"


class OwnershipError(InferCraneError):
    """An object at one of our names is not exactly ours, or someone else owns our fields."""

    code = "ownership-conflict"


class RejectedError(InferCraneError):
    """The API server refused an object or a request (invalid, forbidden, API not served)."""

    code = "rejected"


class ClusterUnavailableError(InferCraneError):
    """The API server could not be reached or answered with a server-side failure."""

    code = "cluster-unavailable"
    retryable = True


class StackBusyError(InferCraneError):
    """Another operation holds the stack; the same call succeeds once it has finished."""

    code = "stack-busy"
    retryable = True


class RunFailedError(InferCraneError):
    """A Pulumi operation failed for a reason the program did not report itself."""

    code = "pulumi-run-failed"


ERRORS: Mapping[str, type[InferCraneError]] = {
    cls.code: cls
    for cls in (
        ConfigError,
        OwnershipError,
        RejectedError,
        ClusterUnavailableError,
        StackBusyError,
        RunFailedError,
    )
}


def from_record(record: Mapping[str, Any]) -> InferCraneError:
    """The typed error a ``to_record`` document describes (unknown codes: ``RunFailedError``)."""
    problems = record.get("problems")
    lines = [str(p) for p in problems] if isinstance(problems, list) else []
    return ERRORS.get(str(record.get("code")), RunFailedError)(lines or ["no problem reported"])
