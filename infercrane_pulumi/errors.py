"""The project's error hierarchy and its wire form.

Every failure a user can see is one of these classes: a stable ``code``, a ``retryable`` flag
(invalid input and refusals are permanent; an unreachable cluster or a busy stack is not) and
``problems``, one line each, starting with their subject. Messages never carry credentials or
raw client output. ``to_record`` carries an error across a process boundary (the command line's
JSON to another language) as data; every code is in one ``{code: class}`` registry, and beside
it is the command line's exit code for each code.
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


class PolicyViolationError(InferCraneError):
    """A mandatory rule of the stack's policy refused the change; nothing was written."""

    code = "policy-violation"


class RejectedError(InferCraneError):
    """The API server refused an object or a request (invalid, forbidden, API not served)."""

    code = "rejected"


class ClusterUnavailableError(InferCraneError):
    """The API server could not be reached or answered with a server-side failure."""

    code = "cluster-unavailable"
    retryable = True


class ClusterTlsError(InferCraneError):
    """No TLS session with the API server: its certificate failed verification against the
    context's certificate authority, or the handshake was refused. Retrying cannot mend a
    certificate, so this is permanent (and not a ``RejectedError``: the server refused nothing)."""

    code = "cluster-tls"


class ClusterAuthenticationError(RejectedError):
    """The API server did not accept the context's credentials (401): an expired token, a
    revoked certificate. A rejection, so ``except RejectedError`` still sees it."""

    code = "cluster-unauthenticated"


class ClusterForbiddenError(RejectedError):
    """The API server forbade the request (403): the identity's RBAC, or an admission check
    such as PodSecurity or a ResourceQuota. A rejection, so ``except RejectedError`` still sees
    it."""

    code = "cluster-forbidden"


class BackendUnavailableError(InferCraneError):
    """The state backend or the database holding stack leases could not be reached, or a run
    lost its lease and was stopped; the same call succeeds once the backend is back."""

    code = "backend-unavailable"
    retryable = True


class BackendRefusedError(InferCraneError):
    """The backend refused us: wrong credentials, a missing database, no permission."""

    code = "backend-refused"


class StackBusyError(InferCraneError):
    """Another operation holds the stack; the same call succeeds once it has finished."""

    code = "stack-busy"
    retryable = True


class UnsettledStateError(InferCraneError):
    """The stack's state holds replicas its last successful run did not record (a run failed or
    was stopped midway), so a call that keeps "what the stack applied" cannot know it; nothing
    was changed. Retryable: the next ``ensure`` of the desired set settles the state."""

    code = "state-unsettled"
    retryable = True


class StaleDesiredStateError(InferCraneError):
    """The desired state read is older than one the stack already applied, or was still being
    written when read; nothing was changed. Retryable: the next run reads it again."""

    code = "stale-desired-state"
    retryable = True


class RunTimeoutError(InferCraneError):
    """A run passed its deadline: the engine was stopped (cancelled, then its processes
    killed) and what it left is recovered by the next run. Retryable."""

    code = "run-timeout"
    retryable = True


class RunFailedError(InferCraneError):
    """A Pulumi operation failed for a reason the program did not report itself."""

    code = "pulumi-run-failed"


class EngineUnsupportedError(InferCraneError):
    """The Pulumi CLI wrote something InferCrane reads in a form it does not know (one of the
    engine's private behaviours changed with its version: ``automation.engine``); nothing was
    decided from it. Permanent: another CLI version is needed."""

    code = "pulumi-unsupported"


class DamagedStateError(InferCraneError):
    """The stack's state in the backend is not what InferCrane writes; nothing was changed."""

    code = "damaged-state"


class InternalError(InferCraneError):
    """A failure the project did not foresee (a bug), named by its type only: a foreign
    exception's message may carry anything, credentials included."""

    code = "internal-error"

    @classmethod
    def of(cls, error: BaseException, *, where: str) -> InternalError:
        return cls(f"{where}: unexpected {type(error).__name__}; please report it")


ERRORS: Mapping[str, type[InferCraneError]] = {
    cls.code: cls
    for cls in (
        ConfigError,
        OwnershipError,
        PolicyViolationError,
        RejectedError,
        ClusterUnavailableError,
        ClusterTlsError,
        ClusterAuthenticationError,
        ClusterForbiddenError,
        BackendUnavailableError,
        BackendRefusedError,
        StackBusyError,
        UnsettledStateError,
        StaleDesiredStateError,
        RunTimeoutError,
        RunFailedError,
        EngineUnsupportedError,
        DamagedStateError,
        InternalError,
    )
}

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_UNAVAILABLE, EXIT_BUSY, EXIT_POLICY = 0, 1, 2, 3, 4, 5
EXIT_INTERRUPTED = 130
# The command line's exit code per error code: invalid input, retry later, or failed.
EXIT_CODES: Mapping[str, int] = {
    ConfigError.code: EXIT_INVALID,
    OwnershipError.code: EXIT_FAILED,
    PolicyViolationError.code: EXIT_POLICY,
    RejectedError.code: EXIT_FAILED,
    ClusterUnavailableError.code: EXIT_UNAVAILABLE,
    ClusterTlsError.code: EXIT_FAILED,
    ClusterAuthenticationError.code: EXIT_FAILED,
    ClusterForbiddenError.code: EXIT_FAILED,
    BackendUnavailableError.code: EXIT_UNAVAILABLE,
    BackendRefusedError.code: EXIT_FAILED,
    StackBusyError.code: EXIT_BUSY,
    UnsettledStateError.code: EXIT_BUSY,
    StaleDesiredStateError.code: EXIT_BUSY,
    RunTimeoutError.code: EXIT_BUSY,
    RunFailedError.code: EXIT_FAILED,
    EngineUnsupportedError.code: EXIT_FAILED,
    DamagedStateError.code: EXIT_FAILED,
    InternalError.code: EXIT_FAILED,
}
