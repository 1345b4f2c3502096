"""The project's error hierarchy.

Every failure a user can see is one of these classes, each with a stable ``code`` and a
``retryable`` flag: invalid input is permanent, cluster and transport trouble is retryable.
Messages start with their subject and never carry credentials or raw client output.
"""

from __future__ import annotations

from collections.abc import Sequence


class InferCraneError(Exception):
    """Root of every error this project raises on purpose."""

    code = "infercrane-error"
    retryable = False


class ConfigError(InferCraneError):
    """The stack configuration is invalid; nothing was sent to any API."""

    code = "invalid-config"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


class OwnershipError(InferCraneError):
    """An object at one of our names is not exactly ours, or someone else owns our fields."""

    code = "ownership-conflict"

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


class RejectedError(InferCraneError):
    """The API server refused an object or a request (invalid, forbidden, API not served)."""

    code = "rejected"


class ClusterUnavailableError(InferCraneError):
    """The API server could not be reached or answered with a server-side failure."""

    code = "cluster-unavailable"
    retryable = True
