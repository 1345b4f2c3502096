"""What a failed engine run means, from its events and its exit, never its text; and the one
way a line of the engine's output is made fit to leave the process (credentials masked)."""

from __future__ import annotations

import re

from infercrane_pulumi.errors import BackendUnavailableError, RunFailedError

MAX_PROBLEMS = 10


def failed(
    stack_name: str, operation: str, diagnostics: list[str], *, finished: bool
) -> RunFailedError | BackendUnavailableError:
    """What a failed engine run means, from its events, never its text: an engine that ran
    every step and reported no error failed recording them in the backend (retryable: the
    retry finds its objects by their durable names); otherwise the run failed, with the
    engine's error diagnostics, each sanitized (one line, no credentials in a URL)."""
    lines = [sanitized(line) for line in dict.fromkeys(diagnostics) if line][:MAX_PROBLEMS]
    if finished and not lines:
        return BackendUnavailableError(
            f"stack {stack_name}: pulumi {operation} ran every step but could not record "
            "them in the backend; try again"
        )
    return RunFailedError(lines or [f"stack {stack_name}: pulumi {operation} failed"])


_CREDENTIALS = (
    # user:password@ in a URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@"), r"\1***@"),
    # Authorization headers and token/password/secret values
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 ***"),
    (
        re.compile(
            r"(?i)\b(token|password|passwd|secret|access[_-]?key)([\"']?\s*[:=]\s*)[^\s,;\"']+"
        ),
        r"\1\2***",
    ),
)


def sanitized(line: str) -> str:
    """A diagnostic line fit to leave the process: at most 300 characters, credentials masked."""
    for pattern, replacement in _CREDENTIALS:
        line = pattern.sub(replacement, line)
    return line[:300]
