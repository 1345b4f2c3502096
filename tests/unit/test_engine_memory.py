"""The CLI's soft memory limit (``engine.memory``): a rule over the resources a run holds, and
the operator's own collector settings."""

from __future__ import annotations

import pytest

from infercrane_pulumi.automation.engine import memory_limit


@pytest.mark.parametrize(
    ("resources", "mib"),
    [
        (0, 64),  # the CLI's own, with nothing in the state
        (8, 65),  # 64 MiB + 896 KiB, rounded up
        (3005, 393),  # 1,000 intents: 64 MiB + 336,560 KiB
        (6005, 721),  # 2,000
    ],
)
def test_the_limit_is_a_base_and_a_share_per_resource_rounded_up(resources: int, mib: int) -> None:
    assert memory_limit(resources, {"PATH": "/usr/bin"}) == {"GOMEMLIMIT": f"{mib}MiB"}


@pytest.mark.parametrize("chosen", [{"GOGC": "100"}, {"GOMEMLIMIT": "2GiB"}, {"GOGC": "off"}])
def test_an_operators_own_collector_setting_means_none_of_ours(chosen: dict[str, str]) -> None:
    assert memory_limit(3005, chosen) == {}
