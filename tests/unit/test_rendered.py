"""What the stacks render to, byte for byte, against files reviewed when they were made.

A change to the rendered objects rolls every replica out once, so it must be a decision, never
a side effect of refactoring: such a change shows here, in the diff of these files. Rewrite
them with ``infercrane-pulumi render --config <stack file>`` when the change is meant.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from infercrane_pulumi.cli import entry

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "rendered"
STACKS = {
    "demo": ROOT / "stacks" / "Pulumi.demo.yaml",
    "every-option": FIXTURES / "Pulumi.every-option.yaml",
    "every-option-kserve": FIXTURES / "Pulumi.every-option-kserve.yaml",
    "defaults-kserve": FIXTURES / "Pulumi.defaults-kserve.yaml",
}


@pytest.mark.parametrize("name", sorted(STACKS))
def test_render_is_byte_identical_to_the_reviewed_objects(name: str) -> None:
    out = io.StringIO()
    assert entry.main(["render", "--config", str(STACKS[name])], stdout=out) == 0
    assert out.getvalue() == (FIXTURES / f"{name}.yaml").read_text(encoding="utf-8")
