"""Which cluster a stack applied to: one part of the record may change within a cluster, both
never; a record of nothing known is never the same as anything."""

from __future__ import annotations

import pytest

from infercrane_pulumi.cluster import placement
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.program.records import ClusterRecord

HERE = ClusterRecord("https://10.96.0.1:443", "a" * 64, "ns-uid-1")


@pytest.mark.parametrize(
    "now",
    [
        HERE,
        ClusterRecord("https://api.example:6443", "a" * 64, "ns-uid-1"),  # reached another way
        ClusterRecord("https://10.96.0.1:443", "b" * 64, "ns-uid-1"),  # the CA rotated
        ClusterRecord("https://10.96.0.1:443", "a" * 64, "ns-uid-2"),  # the namespace made anew
    ],
    ids=["same", "another address", "CA rotated", "namespace made anew"],
)
def test_one_cluster_keeps_its_stack(now: ClusterRecord) -> None:
    placement.check("s", HERE, now)
    placement.check("s", None, now)  # nothing recorded yet


@pytest.mark.parametrize(
    ("recorded", "now"),
    [
        (HERE, ClusterRecord("https://10.96.0.1:443", "b" * 64, "ns-uid-2")),
        (ClusterRecord("https://x", None, None), ClusterRecord("https://x", None, None)),
    ],
    ids=["another cluster", "nothing known"],
)
def test_a_run_reaching_another_cluster_is_refused(
    recorded: ClusterRecord, now: ClusterRecord
) -> None:
    with pytest.raises(ConfigError) as refused:
        placement.check("s", recorded, now)
    [line] = refused.value.problems
    assert line.startswith("stack s: applied to another cluster")
    assert line.endswith(
        "one stack per cluster: name each cluster's stack apart, or give each its own state"
    )
