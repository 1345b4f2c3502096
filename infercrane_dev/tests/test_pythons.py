"""The lowest-versions variant installs exactly the lower bounds pyproject declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from infercrane_dev import pythons


def test_lowest_pins_are_the_declared_lower_bounds_as_constraints() -> None:
    declared = pythons.runtime_requirements(pythons.ROOT / "pyproject.toml")
    pins = pythons.lowest_pins(declared)
    assert len(pins) == len(declared)
    assert pythons.lowest_pins(["psycopg[binary]>=3.2.2,<4", "PyYAML<7,>=6.0.2"]) == [
        "psycopg==3.2.2",  # pip takes no extras in a constraint; psycopg[binary] pins its own
        "PyYAML==6.0.2",
    ]


@pytest.mark.parametrize("requirement", ["pydantic<3", "pydantic==2.14.4", "pydantic"])
def test_a_runtime_requirement_without_one_lower_bound_is_refused(requirement: str) -> None:
    with pytest.raises(ValueError, match="needs exactly one >= lower bound"):
        pythons.lowest_pins([requirement])


def test_installed_versions_are_read_from_pip_freeze_whatever_the_spelling(tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("pulumi_kubernetes==4.25.0\npyyaml==6.0.2\n-e git+https://x/y#egg=z\n")
    declared = ["pulumi-kubernetes>=4.25.0,<5", "PyYAML>=6.0.2,<7", "psycopg[binary]>=3.2.2"]
    assert pythons.versions(freeze, declared) == (
        "pulumi-kubernetes 4.25.0, PyYAML 6.0.2, psycopg ?"
    )
