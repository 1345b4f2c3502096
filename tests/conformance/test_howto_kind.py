"""The how-to "Run inside the cluster" runs as written: its "Try it on Kind" steps, in one bash
process from the repository's root, as a person's shell would (``test_tutorials``): a Kind
cluster of its own (``python -m infercrane_dev.kind up``, then ``down`` whatever happened), the
shipped namespace manifests and runner Deployment applied with ``kubectl``, a replica applied by
the runner from its ConfigMap and seen ``ready`` from inside its Pod, then taken down.

Needs what the Kind test needs (root, Debian's Docker and debootstrap, the ``kind`` and
``coredns`` families, the machine's real-node lock free); skips saying which is missing (fails
under INFERCRANE_REQUIRE_TOOLS=1, as in CI). ``make test`` runs it in its last phase, before
``test_kind.py``'s cluster starts: one Kind cluster at a time on a machine.
"""

from __future__ import annotations

import pytest

from infercrane_dev.kind.hostchecks import unavailable as kind_unavailable
from tests.conformance.harness import ROOT, unavailable
from tests.conformance.test_tutorials import TIMEOUT_SECONDS, runs_as_written

pytestmark = [pytest.mark.conformance, pytest.mark.kind]
PAGE = ROOT / "docs" / "how-to" / "run-inside-the-cluster.md"


@pytest.mark.timeout(TIMEOUT_SECONDS + 60)
def test_run_inside_the_cluster_runs_as_written_on_kind() -> None:
    problem = kind_unavailable()
    if problem is not None:
        unavailable(f"no Kind cluster here: {problem}")
    runs_as_written(PAGE)
