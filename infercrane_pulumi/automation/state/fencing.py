"""Stop a run that lost its stack lease, so it writes nothing more unguarded.

Every process of a leased run (the Pulumi CLI, the providers; the program is served from the
driver's own process and ends with its engine) inherits the run's marker in its environment
(``MARKER_ENV``, a random token per lease). When the lease is lost, ``stop`` kills every process
carrying that token: found by their environment rather than their parent, because a provider
whose engine died is re-parented. Linux only (``/proc``); it never signals a process without the
token.
"""

from __future__ import annotations

from infercrane_pulumi.automation.engine import marks

MARKER_ENV = "INFERCRANE_LEASE"


def marked(token: str) -> list[int]:
    """The processes whose environment carries ``token`` (this process excluded)."""
    return marks.marked(MARKER_ENV, token)


def stop(token: str) -> list[int]:
    """SIGKILL every process of the run marked ``token`` until none is left (or
    ``marks.KILL_SECONDS`` pass); returns the pids killed. The engine dies in the first sweep,
    so nothing new is started after it."""
    return marks.stop(MARKER_ENV, token, grace=0.0)
