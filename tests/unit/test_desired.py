"""The desired state read from the API server, its versions ordered, and a stack file read only
once it is whole."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from infercrane_pulumi.cluster import desired
from infercrane_pulumi.cluster.api import Cluster, Response
from infercrane_pulumi.config.files import read_settled
from infercrane_pulumi.errors import ConfigError, StaleDesiredStateError
from infercrane_pulumi.program.records import DesiredVersion, from_outputs
from tests.unit.fake_cluster import NS, FakeTransport

PATH = f"/api/v1/namespaces/{NS}/configmaps/infercrane-stack"
SOURCE = f"ConfigMap/{NS}/infercrane-stack"


def configmap(data: dict[str, str], *, uid: str = "u1", version: str = "42") -> Response:
    meta = {"name": "infercrane-stack", "namespace": NS, "uid": uid, "resourceVersion": version}
    return Response(200, {"kind": "ConfigMap", "metadata": meta, "data": data})


def test_the_stack_file_is_read_with_its_version() -> None:
    transport = FakeTransport({("GET", PATH): configmap({"Pulumi.s.yaml": "config: {}\n"})})
    found = desired.read(Cluster(transport), NS, "infercrane-stack", "Pulumi.s.yaml")
    assert found == desired.Desired("config: {}\n", DesiredVersion(SOURCE, "u1", "42"))
    assert transport.requests == [("GET", PATH, {})]  # one read, no resourceVersion: a quorum read


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (Response(404, {}), f"{SOURCE}: not found; it holds the stack file this run applies"),
        (
            configmap({"Pulumi.other.yaml": ""}),
            f"{SOURCE}: has no key 'Pulumi.s.yaml'; it holds the stack file as Pulumi.s.yaml",
        ),
    ],
    ids=["no ConfigMap", "no key"],
)
def test_a_configmap_without_the_stack_file_is_refused(answer: Response, expected: str) -> None:
    transport = FakeTransport({("GET", PATH): answer})
    with pytest.raises(ConfigError) as refused:
        desired.read(Cluster(transport), NS, "infercrane-stack", "Pulumi.s.yaml")
    assert refused.value.problems == (expected,)


@pytest.mark.parametrize(
    ("server", "ordered"),
    [("v1.34.4", False), ("v1.35.0", True), ("v1.36.3", True), ("v2.0.0", True), ("dev", False)],
)
def test_resource_versions_are_ordered_only_from_kubernetes_1_35(
    server: str, ordered: bool
) -> None:
    assert desired.comparable(server) is ordered


RECORDED = DesiredVersion(SOURCE, "u1", "100")


@pytest.mark.parametrize(
    ("read", "ordered", "stale"),
    [
        (DesiredVersion(SOURCE, "u1", "99"), True, True),
        (DesiredVersion(SOURCE, "u1", "99"), False, False),  # before 1.35: the fresh read orders
        (DesiredVersion(SOURCE, "u1", "100"), True, False),
        (DesiredVersion(SOURCE, "u1", "1000"), True, False),  # longer is newer, not "1000" < "99"
        (DesiredVersion(SOURCE, "u2", "5"), True, False),  # made anew: a newer write
        (DesiredVersion(f"ConfigMap/{NS}/other", "u1", "5"), True, False),
        (DesiredVersion(SOURCE, "u1", "x9"), True, False),  # not of KEP-5504's form: unordered
    ],
)
def test_a_version_older_than_the_applied_one_is_refused(
    read: DesiredVersion, ordered: bool, stale: bool
) -> None:
    if not stale:
        desired.check_order(read, RECORDED, ordered=ordered)
        desired.check_order(read, None, ordered=ordered)
        return
    with pytest.raises(StaleDesiredStateError) as refused:
        desired.check_order(read, RECORDED, ordered=ordered)
    assert refused.value.retryable
    assert refused.value.problems == (
        f"{SOURCE}: read at resourceVersion 99, older than 100, which the stack already "
        "applied; nothing was changed",
    )


def test_the_applied_version_travels_in_the_outputs() -> None:
    outputs = {"desiredVersion": RECORDED.record(), "replicas": {}}
    assert from_outputs(outputs).desired == RECORDED
    assert from_outputs({"replicas": {}}).desired is None


def test_a_file_rewritten_in_place_is_read_once_it_is_whole(tmp_path: Path) -> None:
    """A writer rewrites the file in place and has written its first half when the reader,
    woken by those bytes, comes: while the reader waits, the writer finishes, then nothing
    writes for the quiet time (its waits stand for the time that passes)."""
    path = tmp_path / "Pulumi.s.yaml"
    whole = "config:\n  infercrane:replicas:\n    - a\n    - b\n"
    half = whole[: len(whole) // 2]
    path.write_text(half)
    waits: list[float] = []

    def passing(seconds: float) -> None:
        if not waits:
            with path.open("a") as file:
                file.write(whole[len(half) :])
        else:
            quiet_since = time.time() - 2
            os.utime(path, (quiet_since, quiet_since))
        waits.append(seconds)

    assert read_settled(path, quiet=1.0, sleep=passing) == whole
    assert len(waits) == 2


def test_a_file_that_keeps_changing_is_refused_retryably(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text("config: {}\n")
    with pytest.raises(StaleDesiredStateError) as refused:
        read_settled(path, quiet=0.5, within=0.3, sleep=lambda _: os.utime(path))
    assert refused.value.problems == (
        f"{path}: still being written after 0.3 s; write it aside and rename it into place",
    )


def test_a_modification_time_ahead_of_the_clock_needs_two_reads_that_agree(
    tmp_path: Path,
) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text("config: {}\n")
    ahead = time.time() + 3600
    os.utime(path, (ahead, ahead))
    waits: list[float] = []
    assert read_settled(path, quiet=0.5, sleep=waits.append) == "config: {}\n"
    assert waits == [0.5]
