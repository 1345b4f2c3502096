"""The tutorials run as written: every page of docs/tutorials with steps marked ``run``
(infercrane_dev/docsrun.py) runs them, in order, in one bash process from the repository's root,
as a person's shell would: its own local control plane, the hermetic Pulumi CLI, a project and
a state directory of its own. A step that no longer works fails the test, naming the page and
line of the step.

The shell is a person's, so it gets none of the provider's ``PULUMI_K8S_*`` variables the suite
exports for the drivers to drop (a person's ``pulumi up`` refuses the one that forces applies),
and it keeps the suite's decoy ``KUBECONFIG`` until a step exports the tutorial's own.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from infercrane_dev import docsrun
from tests.conformance.harness import LOCAL_BINARIES, ROOT, require_toolchain
from tests.runguard import by_a_person

pytestmark = pytest.mark.conformance

TUTORIALS = sorted(
    page
    for page in (ROOT / "docs" / "tutorials").glob("*.md")
    if any(block.marker == "run" for block in docsrun.blocks(page))
)
# What the tutorials' steps call besides the control plane and the engine.
TUTORIAL_BINARIES = (*LOCAL_BINARIES, "kubectl")
TIMEOUT_SECONDS = 600


def test_the_first_two_tutorials_have_steps() -> None:
    assert [page.name for page in TUTORIALS] == ["first-integration.md", "first-up.md"]


@pytest.mark.timeout(TIMEOUT_SECONDS + 60)
@pytest.mark.parametrize("page", TUTORIALS, ids=lambda page: page.name)
def test_a_tutorial_runs_as_written(page: Path) -> None:
    require_toolchain(TUTORIAL_BINARIES)
    runs_as_written(page)


def runs_as_written(page: Path) -> None:
    """The page's steps in one bash process, as a person's shell: fails naming the step."""
    person = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_K8S_")}
    script = docsrun.tutorial_script(docsrun.blocks(page))
    # Its own process group, so that a run past its deadline is stopped with its children; a
    # SIGTERM (not SIGKILL) lets the script's cleanup stop the cluster it started.
    process = by_a_person(
        subprocess.Popen,
        ["bash", "-c", script],
        cwd=ROOT,
        env=person,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
        pytest.fail(f"{page}: still running after {TIMEOUT_SECONDS} s:\n{output[-4000:]}")
    assert process.returncode == 0, f"{page}: a step failed:\n{output[-4000:]}"
