"""The PR comment and the JSON: layout, loud warnings, escaping, the size cap, the schema."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema

from infercrane_pulumi.cli import views
from infercrane_pulumi.policy.rules import Finding
from infercrane_pulumi.program.records import DesiredVersion
from infercrane_pulumi.review import comments
from infercrane_pulumi.review.changes import (
    Drift,
    KeyChange,
    Left,
    ObjectChange,
    PolicyFinding,
    StackChanges,
)
from infercrane_pulumi.review.renames import Rename

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "infercrane_pulumi" / "schemas" / "diff.schema.json").read_text())


DIFF = "-a: 1\n+a: 2\n"


def key(name: str, change: Any, diff: str = DIFF) -> KeyChange:
    kinds = ("Deployment", "Service")
    objects = tuple(
        ObjectChange(kind, f"obj-{name}", change, diff="" if change == "same" else diff)
        for kind in kinds
    )
    return KeyChange(name, change, objects)


STACK = StackChanges(
    operation="preview",
    project="infercrane",
    stack="prod",
    replicas=(
        key("old", "delete"),
        key("swap", "replace"),
        key("edited", "update"),
        key("new", "create"),
        key("kept", "same"),
    ),
    renames=(Rename(old_key="old", new_key="new"),),
    drift=(
        Drift("kept", "Service", "obj-kept", (), gone=True),
        Drift("edited", "Deployment", "obj-edited", ("spec",), gone=False),
    ),
    left=(Left("stray", "Deployment", "obj-stray", "not named"),),
    notes=("A note.",),
    policy=(
        PolicyFinding(Finding("model-name", "advisory", "new", "new: model x matches none of y")),
        PolicyFinding(Finding("gpu-budget", "advisory", None, "the replicas hold 3 GPUs, over 2")),
    ),
)


def details(name: str, change: str, diff: str = DIFF) -> str:
    return (
        f"<details><summary><b>{change}</b> <code>{name}</code></summary>\n\n"
        f"Deployment <code>obj-{name}</code>: **{change}**\n\n```diff\n{diff}```\n\n"
        f"Service <code>obj-{name}</code>: **{change}**\n\n```diff\n{diff}```\n\n</details>"
    )


def test_the_comment_leads_with_its_heading_the_result_and_the_warnings() -> None:
    assert (
        comments.comment([STACK])
        == "\n\n".join(
            [
                "#### InferCrane `preview` on infercrane/prod",
                "**Plan: 1 to add, 2 to change, 1 to destroy, 1 unchanged**",
                "> [!CAUTION]\n> **Deletes the objects of 1 external key:** <code>old</code>.",
                "> [!WARNING]\n> **Replaces (deletes, then recreates) the objects of 1 external "
                "key:** <code>swap</code>.",
                "> [!NOTE]\n> This looks like a rename of <code>old</code> to <code>new</code>: "
                "external keys are durable, so this deletes <code>old</code>'s objects and creates "
                "<code>new</code>'s.",
                "A note.",
                "##### Policy\n\n| status | enforcement | rule | finding |\n"
                "| --- | --- | --- | --- |\n"
                "| holds | advisory | <code>model-name</code> | new: model x matches none of y |\n"
                "| holds | advisory | <code>gpu-budget</code> | the replicas hold 3 GPUs, over 2 |",
                details("old", "delete"),
                details("swap", "replace"),
                details("edited", "update"),
                details("new", "create"),
                "1 unchanged external key not listed.",
                "##### Drift found by the refresh\n\n"
                "Not part of this change: the cluster differs from Pulumi's state, and the run "
                "puts these objects back.\n\n| key | object | differs |\n| --- | --- | --- |\n"
                "| <code>kept</code> | Service <code>obj-kept</code> | deleted out of band |\n"
                "| <code>edited</code> | Deployment <code>obj-edited</code> | <code>spec</code> |",
            ]
        )
        + "\n"
    )


def test_no_changes_says_so_and_carries_the_skip_marker() -> None:
    unchanged = StackChanges("diff", "p", "s", (key("a", "same"), key("b", "same")))
    assert comments.comment([unchanged], title="### T") == (
        "### T\n\n#### InferCrane `diff` on p/s\n\n**No changes**\n\n"
        "2 unchanged external keys not listed.\n\n" + comments.NO_CHANGES_MARKER + "\n"
    )
    assert comments.NO_CHANGES_MARKER not in comments.comment([STACK])


def test_what_comes_from_the_change_renders_as_text_and_cannot_close_the_fence() -> None:
    hostile = "<img src=x onerror=alert(1)> **bold** `tick` | pipe"
    diff = "+args: ['```', '````']\n"
    text = comments.comment(
        [
            StackChanges(
                "diff",
                "p",
                "s",
                (
                    KeyChange(
                        hostile, "create", (ObjectChange("Service", hostile, "create", diff=diff),)
                    ),
                ),
            )
        ]
    )
    escaped = (
        "&#60;img src=x onerror=alert(1)&#62; &#42;&#42;bold&#42;&#42; &#96;tick&#96; &#124; pipe"
    )
    assert f"<code>{escaped}</code>" in text
    assert hostile not in text
    assert f"`````diff\n{diff}`````" in text


def test_a_long_comment_keeps_summary_and_warnings_and_says_how_many_diffs_it_cut() -> None:
    big = "+" + "x" * 998 + "\n"
    stack = StackChanges(
        "diff",
        "p",
        "s",
        (key("gone", "delete", big), *(key(f"k{i:03}", "create", big) for i in range(100))),
    )
    text = comments.comment([stack], limit=20_000)
    shown = text.count("<details>")
    assert len(text) <= 20_000
    assert 0 < shown < 101
    assert "**Plan: 100 to add, 0 to change, 1 to destroy, 0 unchanged**" in text
    assert "**Deletes the objects of 1 external key:** <code>gone</code>." in text
    assert "<b>delete</b> <code>gone</code>" in text  # the most consequential diff stays
    assert text.endswith(
        f"**Cut:** the diffs of {101 - shown} of 101 changed keys are not shown, to stay "
        "within GitHub's comment size limit; the JSON output has every diff.\n"
    )


def test_warnings_name_keys_within_their_share_and_count_the_rest() -> None:
    stack = StackChanges(
        "diff", "p", "s", tuple(key(f"k{i:04}", "delete", "") for i in range(2000))
    )
    text = comments.comment([stack], limit=8_000)
    [warning] = [block for block in text.split("\n\n") if block.startswith("> [!CAUTION]")]
    named = warning.count("<code>")
    assert len(text) <= 8_000
    assert 0 < named < 2000
    assert warning.endswith(f" and {2000 - named} more.")


def test_too_many_stacks_for_the_limit_are_truncated_saying_how_much() -> None:
    stacks = [StackChanges("diff", "p", f"stack-{i}", (key("a", "delete"),)) for i in range(50)]
    text = comments.comment(stacks, limit=2_000)
    assert len(text) == 2_000
    omitted = int(text.rsplit("characters, ", 1)[1].split(" ")[0])
    assert text.endswith(f"**Cut:** truncated at 2000 characters, {omitted} characters omitted.\n")
    assert text.startswith("#### InferCrane `diff` on p/stack-0")
    assert omitted > 0


def test_the_json_follows_the_shipped_schema_whole() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    document = views.stack_changes(STACK)
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    jsonschema.Draft202012Validator(SCHEMA).validate([document, document])
    assert [(r["externalKey"], r["change"]) for r in document["replicas"]] == [
        ("old", "delete"),
        ("swap", "replace"),
        ("edited", "update"),
        ("new", "create"),
        ("kept", "same"),
    ]
    deleted: dict[str, Any] = {"uid": None, "change": "delete", "fields": [], "diff": DIFF}
    assert (
        document
        == {
            "apiVersion": "infercrane.dev/diff/v2",
            "operation": "preview",
            "project": "infercrane",
            "stack": "prod",
            "namespace": None,
            "summary": {"add": 1, "change": 2, "destroy": 1, "same": 1, "changes": 4},
            "replicas": [
                {
                    "externalKey": "old",
                    "change": "delete",
                    "resourceId": None,
                    "endpoint": None,
                    "objects": [
                        {"kind": "Deployment", "name": "obj-old"} | deleted,
                        {"kind": "Service", "name": "obj-old"} | deleted,
                    ],
                    "policy": [],
                    "reasons": [],  # a diff's: no verdict
                },
                *document["replicas"][1:],
            ],
            "renames": [{"oldKey": "old", "newKey": "new"}],
            "drift": [
                {
                    "externalKey": "kept",
                    "kind": "Service",
                    "name": "obj-kept",
                    "fields": [],
                    "gone": True,
                },
                {
                    "externalKey": "edited",
                    "kind": "Deployment",
                    "name": "obj-edited",
                    "fields": ["spec"],
                    "gone": False,
                },
            ],
            "left": [
                {
                    "externalKey": "stray",
                    "kind": "Deployment",
                    "name": "obj-stray",
                    "reason": "not named",
                }
            ],
            "notes": ["A note."],
            "verifiedUnchanged": False,
            "policy": [
                {
                    "rule": "gpu-budget",
                    "enforcement": "advisory",
                    "externalKey": None,
                    "message": "the replicas hold 3 GPUs, over 2",
                    "status": None,
                }
            ],
            "desiredVersion": None,  # a diff reads no ConfigMap
        }
    )
    read = DesiredVersion("ConfigMap/prod/infercrane-stack", "u-1", "42")
    applied = views.stack_changes(dataclasses.replace(STACK, desired=read))
    jsonschema.Draft202012Validator(SCHEMA).validate(applied)
    assert applied["desiredVersion"] == {
        "source": "ConfigMap/prod/infercrane-stack",
        "uid": "u-1",
        "resourceVersion": "42",
    }
    [new] = [r for r in document["replicas"] if r["externalKey"] == "new"]
    assert new["policy"] == [
        {
            "rule": "model-name",
            "enforcement": "advisory",
            "externalKey": "new",
            "message": "new: model x matches none of y",
            "status": None,
        }
    ]


def test_the_envelope_holds_the_one_shape_of_a_stack_change() -> None:
    """``preview``/``up``/``remove``/``destroy`` results and ``diff`` documents are one shape:
    the envelope's copy of its definitions is the diff schema's, whole."""
    envelope = json.loads(
        (ROOT / "infercrane_pulumi" / "schemas" / "envelope.schema.json").read_text()
    )
    assert {name: envelope["$defs"][name] for name in SCHEMA["$defs"]} == SCHEMA["$defs"]
    assert envelope["properties"]["apiVersion"] == {"const": "infercrane.dev/cli/v2"}
    assert SCHEMA["$defs"]["stackChanges"]["properties"]["apiVersion"] == {
        "const": views.DIFF_VERSION
    }


def test_a_runs_result_reads_most_consequential_first_whatever_its_order() -> None:
    in_stack_order = dataclasses.replace(STACK, replicas=tuple(reversed(STACK.replicas)))
    assert comments.comment([in_stack_order]) == comments.comment([STACK])


def test_a_runs_table_and_summary_name_what_it_left_by_key() -> None:
    """What a removal left (a stopped run's objects of keys it did not name) reads as its own
    rows and in the summary, never as a change."""
    left = (
        Left("stray", "Deployment", "obj-stray", "not named"),
        Left("stray", "Service", "obj-stray", "not named"),
    )
    result = StackChanges("up", "infercrane", "prod", (key("old", "delete"),), left=left)
    header, rows = views.stack_result_table(result)
    assert header == ["KEY", "CHANGE", "OBJECTS", "ENDPOINT"]
    assert rows[-1] == ["stray", "left", "Deployment/obj-stray, Service/obj-stray", "-"]
    assert views.summary_line(result) == (
        "up prod: 0 to add, 0 to change, 1 to destroy, 0 unchanged; 1 key(s) left, not named "
        "by this run: the next ensure decides"
    )
