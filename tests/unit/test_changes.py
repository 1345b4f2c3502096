"""The change model: replace versus update, per-key changes, likely renames, the summary."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.review import changes, yamldiff
from infercrane_pulumi.review.changes import ObjectChange, Summary
from infercrane_pulumi.review.renames import Rename, find_renames
from tests.unit import samples


def objects(*replicas: dict[str, Any], **settings: Any) -> list[Manifest]:
    config = parse_stack_config(samples.kubernetes(**settings), list(replicas))
    return workloads.stack_objects(config)


DEPLOYMENT, SERVICE = objects(samples.replica())


def changed(obj: Manifest, path: str, value: Any) -> Manifest:
    copied = copy.deepcopy(obj)
    *parents, last = path.split(".")
    target = copied
    for part in parents:
        target = target.setdefault(part, {})
    target[last] = value
    return copied


@pytest.mark.parametrize(
    ("obj", "path", "value", "expected"),
    [
        (DEPLOYMENT, "spec.selector", {"matchLabels": {"a": "b"}}, "replace"),
        (DEPLOYMENT, "metadata.namespace", "elsewhere", "replace"),
        (DEPLOYMENT, "apiVersion", "apps/v1beta2", "replace"),
        (SERVICE, "spec.clusterIP", "10.96.0.10", "replace"),
        (SERVICE, "spec.clusterIPs", ["10.96.0.10"], "replace"),
        (DEPLOYMENT, "spec.replicas", 2, "update"),
        (DEPLOYMENT, "metadata.labels", {"team": "a"}, "update"),
        # Selectors of Services are mutable; only the Deployment's is not.
        (SERVICE, "spec.selector", {"a": "b"}, "update"),
        (SERVICE, "spec.type", "NodePort", "update"),
    ],
)
def test_only_immutable_fields_make_a_replacement(
    obj: Manifest, path: str, value: Any, expected: str
) -> None:
    assert changes.object_change(obj, changed(obj, path, value)).change == expected


def test_absent_sides_make_create_delete_or_nothing() -> None:
    assert [
        changes.object_change(None, SERVICE).change,
        changes.object_change(SERVICE, None).change,
        changes.object_change(SERVICE, copy.deepcopy(SERVICE)).change,
    ] == ["create", "delete", "same"]


# The key rule, case by case (the change model's table, docs/tutorials/reading-a-preview.md): the
# engine's results and the offline diff both apply it (tests/unit/test_results.py checks that they
# agree on every case).
KEY_RULE: list[tuple[tuple[changes.Change, ...], changes.Change]] = [
    ((), "same"),
    (("same", "same"), "same"),
    (("create", "create"), "create"),
    (("delete", "delete"), "delete"),
    (("update", "same"), "update"),
    (("same", "create"), "update"),  # an object deleted out of band, created again
    (("same", "delete"), "update"),
    (("update", "create"), "update"),
    (("update", "replace"), "replace"),
    (("delete", "create"), "replace"),  # a workload-API switch
    (("delete", "delete", "create"), "replace"),
]


@pytest.mark.parametrize(("objects_changes", "expected"), KEY_RULE)
def test_the_key_rule(objects_changes: tuple[changes.Change, ...], expected: str) -> None:
    assert changes.key_change(objects_changes) == expected


def test_switching_the_workload_api_replaces_every_key() -> None:
    result = changes.stack_changes(
        operation="diff",
        project="p",
        stack="s",
        old=objects(samples.replica()),
        new=objects(samples.replica(), workloadApi="kserve"),
    )
    [replica] = result.replicas
    assert (replica.change, [(o.kind, o.change) for o in replica.objects]) == (
        "replace",
        [("Deployment", "delete"), ("InferenceService", "create"), ("Service", "delete")],
    )


def test_keys_come_most_consequential_first_and_the_summary_counts_keys() -> None:
    base = [
        samples.replica(externalKey="same"),
        samples.replica(externalKey="gone", model="m/gone"),
        samples.replica(externalKey="edited"),
    ]
    head = [
        samples.replica(externalKey="same"),
        samples.replica(externalKey="edited", runtimeArgs=["--x"]),
        samples.replica(externalKey="new", model="m/new"),
    ]
    result = changes.stack_changes(
        operation="diff", project="p", stack="s", old=objects(*base), new=objects(*head)
    )
    assert [(r.external_key, r.change) for r in result.replicas] == [
        ("gone", "delete"),
        ("edited", "update"),
        ("new", "create"),
        ("same", "same"),
    ]
    assert result.summary == Summary(add=1, change=1, destroy=1, same=1)
    assert result.summary.line == "Plan: 1 to add, 1 to change, 1 to destroy, 1 unchanged"
    assert Summary.of(["same", "same"]).line == "No changes"
    assert result.renames == ()


def test_a_deleted_and_a_created_key_with_equal_intents_are_a_likely_rename() -> None:
    base = [samples.replica(externalKey="old-name"), samples.replica(externalKey="other")]
    head = [
        samples.replica(externalKey="new-name"),
        samples.replica(externalKey="other"),
        # Created too, but with another model: not the rename's other half.
        samples.replica(externalKey="unrelated", model="m/other"),
    ]
    result = changes.stack_changes(
        operation="diff", project="p", stack="s", old=objects(*base), new=objects(*head)
    )
    assert result.renames == (Rename(old_key="old-name", new_key="new-name"),)
    assert result.deleted_keys == ["old-name"]


def test_each_key_is_paired_once() -> None:
    deleted = changes.by_key(objects(samples.replica(externalKey="a")))
    created = changes.by_key(
        objects(samples.replica(externalKey="b"), samples.replica(externalKey="c"))
    )
    assert find_renames(deleted, created) == [Rename(old_key="a", new_key="b")]
    assert find_renames(created, deleted) == [Rename(old_key="b", new_key="a")]


def test_an_object_change_names_the_object_from_whichever_side_has_it() -> None:
    assert changes.object_change(SERVICE, None) == ObjectChange(
        kind="Service",
        name=SERVICE["metadata"]["name"],
        change="delete",
        diff=yamldiff.diff_objects(SERVICE, None),
    )
