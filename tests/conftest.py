"""Suite-wide rules: conformance tests (real binaries, a real API server) get a long timeout;
every other test keeps the short default from pyproject.toml. And what the suite proves is the
path users take: a ``pulumi`` started in this process, by any test, dev helper or benchmark
helper, however spelled, starts the engine only through ``engine.process.run`` on the one run
path (``infercrane_pulumi.automation.run``), or the test fails before the process starts. The
rule, and its named exceptions (a person's run through ``by_a_person``, a stand-in ``pulumi``
named by ``stand_in_cli``), are ``tests/runguard.py``'s. And no test leaves an engine process
behind: the session fails if one outlives it (``tests/leftovers.py``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests import leftovers, runguard

CONFORMANCE_TIMEOUT_SECONDS = 600
# pulumi-kubernetes forces its applies over other managers when this is "true". Every test runs
# beside it, as beside a control plane's own variables (issue 39): the runs never pass it to the
# engine, and a person's `pulumi up` refuses it (tests/conformance/test_ambient_kubeconfig.py).
HOSTILE_VARIABLES = {"PULUMI_K8S_ENABLE_PATCH_FORCE": "true"}


def pytest_configure() -> None:
    os.environ.update(HOSTILE_VARIABLES)
    # Inherited by every process the session starts, and theirs (``leftovers``); a session run
    # inside another's (a test of the suite itself) marks its own.
    os.environ[leftovers.MARK] = leftovers.new_mark()


def pytest_sessionfinish(session: pytest.Session) -> None:
    left = leftovers.left_behind(os.environ[leftovers.MARK], grace=leftovers.GRACE_SECONDS)
    if left:
        print("\nengine processes left behind by this session:", *left, sep="\n  ")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("conformance") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(CONFORMANCE_TIMEOUT_SECONDS))


@pytest.fixture(autouse=True, scope="session")
def engine_runs_only_through_the_run_path() -> Iterator[None]:
    with runguard.guarding():
        yield
