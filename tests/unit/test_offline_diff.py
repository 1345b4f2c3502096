"""The offline diff on a throwaway git repository: per-key changes between a base ref and the
working tree, the PR comment's loud parts and size cap, the base rendered by the base's own
code, and every kind of bad input as one line naming its side."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from infercrane_pulumi.cli import entry
from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.errors import EXIT_OK, EXIT_POLICY, ConfigError
from infercrane_pulumi.objects import naming
from infercrane_pulumi.review import comments
from infercrane_pulumi.review.offline_diff import TITLE
from tests.unit import samples
from tests.unit.gitrepos import (
    BASE_REPLICAS,
    HEAD_REPLICAS,
    STACK,
    commit,
    diff_json,
    git,
    new_repo,
    write_stack,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = jsonschema.Draft202012Validator(
    yaml.safe_load((ROOT / "infercrane_pulumi" / "schemas" / "diff.schema.json").read_text())
)


def changes_of(data: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(r["externalKey"], r["change"]) for doc in data for r in doc["replicas"]]


def test_each_key_gets_its_change_and_only_changed_fields_show(repo: Path) -> None:
    data, markdown = diff_json(base="base", configs=[Path(STACK)], repo=repo)
    SCHEMA.validate(data)
    [doc] = data
    assert (doc["project"], doc["stack"], doc["namespace"], doc["summary"]) == (
        "infercrane",
        "test",
        "infercrane-system",
        {"add": 2, "change": 1, "destroy": 2, "same": 1, "changes": 5},
    )
    assert changes_of(data) == [
        ("old-name", "delete"),
        ("removed", "delete"),
        ("changed", "update"),
        ("added", "create"),
        ("new-name", "create"),
        ("kept", "same"),
    ]
    assert doc["renames"] == [{"oldKey": "old-name", "newKey": "new-name"}]
    settings = parse_stack_config(samples.kubernetes(), []).kubernetes
    old, new = (
        naming.intent_hash(settings, parse_stack_config(samples.kubernetes(), [r]).replicas[0])
        for r in (BASE_REPLICAS[1], HEAD_REPLICAS[1])
    )
    hashes = (
        f" metadata:\n   annotations:\n"
        f"-    infercrane.dev/intent-hash: {old}\n+    infercrane.dev/intent-hash: {new}\n"
    )
    argv = ["--model", "Qwen/Qwen3-8B", "--host", "0.0.0.0", "--port", "'8000'", "--max-model-len"]
    [changed] = [r for r in doc["replicas"] if r["externalKey"] == "changed"]
    assert [(o["kind"], o["change"], o["diff"]) for o in changed["objects"]] == [
        (
            "Deployment",
            "update",
            hashes
            + " spec:\n   template:\n     spec:\n       containers:\n       - name: runtime\n"
            + "         args:\n"
            + "".join(f"         - {arg}\n" for arg in argv)
            + "-        - '8192'\n+        - '16384'\n",
        ),
        ("Service", "update", hashes),
    ]
    lines = markdown.split("\n\n")
    assert lines[:4] == [
        TITLE,
        lines[1],  # names the base commit, checked below
        "#### InferCrane `diff` on infercrane/test",
        "**Plan: 2 to add, 1 to change, 2 to destroy, 1 unchanged**",
    ]
    assert lines[1].startswith(
        "Base <code>base</code> (<code>" + git(repo, "rev-parse", "base")[:12]
    )
    assert (
        "> **Deletes the objects of 2 external keys:** <code>old-name</code>, <code>removed</code>."
        in markdown
    )
    assert (
        "looks like a rename of <code>old-name</code> to <code>new-name</code>: external keys are "
        "durable, so this deletes <code>old-name</code>'s objects and creates "
        "<code>new-name</code>'s." in markdown
    )
    assert markdown.count("<details>") == 5
    assert "1 unchanged external key not listed." in markdown


def test_a_stack_new_at_head_creates_all_and_one_gone_at_head_deletes_all(repo: Path) -> None:
    write_stack(repo, [samples.replica(externalKey="fresh")], path="stacks/Pulumi.new.yaml")
    (repo / STACK).unlink()
    data, markdown = diff_json(base="base", configs=None, repo=repo)
    SCHEMA.validate(data)
    assert [(d["stack"], d["namespace"], d["summary"], d["notes"]) for d in data] == [
        (
            "new",
            "infercrane-system",
            {"add": 1, "change": 0, "destroy": 0, "same": 0, "changes": 1},
            ["stacks/Pulumi.new.yaml is new since base base: every intent is created."],
        ),
        (
            "test",
            "infercrane-system",  # the base's objects' namespace: where they are deleted
            {"add": 0, "change": 0, "destroy": 4, "same": 0, "changes": 4},
            [f"{STACK} is deleted: every intent's objects are deleted."],
        ),
    ]
    assert (
        "> **Deletes the objects of 4 external keys:** <code>changed</code>, <code>kept</code>, "
        "<code>old-name</code>, <code>removed</code>." in markdown
    )


def test_the_policy_names_what_the_change_brings_keeps_and_fixes(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    policy = {"gpuProducts": ["NVIDIA-L40S"], "modelPatterns": ["Qwen/*"]}
    outside = samples.replica(externalKey="outside", model="org/model")
    write_stack(
        repo, [samples.replica(externalKey="moved", gpu="NVIDIA-H100"), outside], policy=policy
    )
    commit(repo, "base")
    flagged = samples.replica(externalKey="flagged", runtimeArgs=["--trust-remote-code"])
    write_stack(repo, [samples.replica(externalKey="moved"), outside, flagged], policy=policy)
    data, markdown = diff_json(base="HEAD", configs=None, repo=repo)
    SCHEMA.validate(data)
    [doc] = data
    moved = "moved: GPU product NVIDIA-H100 is not allowed here (allowed: NVIDIA-L40S)"
    new_flag = "flagged: --trust-remote-code is in the runtime's argv"
    kept_model = "outside: model org/model matches none of Qwen/*"
    assert {r["externalKey"]: r["policy"] for r in doc["replicas"]} == {
        "flagged": [
            {
                "rule": "runtime-flags",
                "enforcement": "mandatory",
                "externalKey": "flagged",
                "message": new_flag,
                "status": "new",
            }
        ],
        "moved": [
            {
                "rule": "gpu-product",
                "enforcement": "mandatory",
                "externalKey": "moved",
                "message": moved,
                "status": "fixed",
            }
        ],
        "outside": [
            {
                "rule": "model-name",
                "enforcement": "advisory",
                "externalKey": "outside",
                "message": kept_model,
                "status": "kept",
            }
        ],
    }
    assert doc["policy"] == []
    assert (
        "> [!CAUTION]\n> **Breaks 1 mandatory policy rule: the change cannot be applied as it "
        "is.**\n> - <code>runtime-flags</code>: flagged: --trust-remote-code is in the "
        "runtime&#39;s argv\n\n##### Policy\n\n| status | enforcement | rule | finding |\n"
        "| --- | --- | --- | --- |\n"
        "| new | mandatory | <code>runtime-flags</code> | flagged: --trust-remote-code is in the "
        "runtime&#39;s argv |\n"
        "| kept | advisory | <code>model-name</code> | outside: model org/model matches none of "
        "Qwen/&#42; |\n"
        "| fixed | mandatory | <code>gpu-product</code> | moved: GPU product NVIDIA-H100 is not "
        "allowed here (allowed: NVIDIA-L40S) |\n" in markdown
    )


def test_the_policy_gate_exits_5_only_on_a_new_mandatory_violation(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    flagged = samples.replica(externalKey="flagged", runtimeArgs=["--trust-remote-code"])
    write_stack(repo, [samples.replica()])
    commit(repo, "base")

    def gate(*extra: str) -> tuple[int, str]:
        out = io.StringIO()
        argv = ["diff", "--all", "--base", "HEAD", "--project-dir", str(repo), *extra]
        return entry.main(argv, stdout=out), out.getvalue()

    assert gate("--policy-gate") == gate()  # nothing new: the same output, exit 0
    assert gate()[0] == EXIT_OK
    write_stack(repo, [samples.replica(), flagged])
    code, markdown = gate("--policy-gate")
    assert (code, markdown) == (EXIT_POLICY, gate()[1])
    assert "**Breaks 1 mandatory policy rule" in markdown
    assert gate()[0] == EXIT_OK
    commit(repo, "the violation is at base now: kept, not new")
    write_stack(repo, [samples.replica(), flagged, samples.replica(externalKey="more")])
    assert gate("--policy-gate")[0] == EXIT_OK


def test_a_change_that_loosens_its_own_policy_still_meets_the_platforms(tmp_path: Path) -> None:
    """A pull request that turns its stack file's rule off, in the change that breaks it, is
    still gated by the platform's policy (``--policy``), which the change cannot edit."""
    repo = new_repo(tmp_path / "repo")
    write_stack(repo, [samples.replica()])
    commit(repo, "base")
    platform = tmp_path / "platform.yaml"
    platform.write_text("allowedSecrets: [infercrane-worker]\n")
    loosened = {"allowedSecrets": ["team-hf"], "enforcement": {"secret-reference": "disabled"}}
    hf = {"secretName": "team-hf", "key": "token"}
    write_stack(repo, [samples.replica()], policy=loosened, hfToken=hf)
    argv = ["diff", "--all", "--base", "HEAD", "--project-dir", str(repo), "--policy-gate"]
    assert entry.main(argv, stdout=io.StringIO()) == EXIT_OK  # judged by its own alone
    out = io.StringIO()
    assert entry.main([*argv, "--policy", str(platform), "--json"], stdout=out) == EXIT_POLICY
    [doc] = json.loads(out.getvalue())["result"]
    assert doc["notes"][0] == "Both sides are judged by the platform's policy too."
    assert [(f["rule"], f["enforcement"], f["status"]) for f in doc["replicas"][0]["policy"]] == [
        ("secret-reference", "mandatory", "new")
    ]


def test_a_policy_edit_is_noted_and_each_side_judged_by_its_own(repo: Path) -> None:
    write_stack(repo, HEAD_REPLICAS, policy={"modelPatterns": ["Qwen/*"]})
    data, _ = diff_json(base="HEAD", configs=None, repo=repo)
    [doc] = data
    assert doc["notes"] == [f"{STACK} changes infercrane:policy: each side is judged by its own."]
    assert [(f["externalKey"], f["status"]) for r in doc["replicas"] for f in r["policy"]] == [
        ("added", "new"),
        ("new-name", "new"),
    ]


def test_no_change_is_said_and_marked(repo: Path) -> None:
    data, markdown = diff_json(base="HEAD", configs=None, repo=repo)
    assert [d["summary"] for d in data] == [
        {"add": 0, "change": 0, "destroy": 0, "same": 4, "changes": 0}
    ]
    assert "**No changes**" in markdown
    assert markdown.endswith("\n" + comments.NO_CHANGES_MARKER + "\n")


def test_a_thousand_added_intents_stay_under_the_comment_limit(repo: Path) -> None:
    many = [samples.replica(externalKey=f"bulk-{i:04}") for i in range(1000)]
    write_stack(repo, many)
    data, markdown = diff_json(base="base", configs=[Path(STACK)], repo=repo)
    shown = markdown.count("<details>")
    assert data[0]["summary"] == {
        "add": 1000,
        "change": 0,
        "destroy": 4,
        "same": 0,
        "changes": 1004,
    }
    assert len(markdown) <= comments.COMMENT_LIMIT
    assert "**Plan: 1000 to add, 0 to change, 4 to destroy, 0 unchanged**" in markdown
    assert "**Deletes the objects of 4 external keys:**" in markdown
    assert 4 <= shown < 1004
    assert f"**Cut:** the diffs of {1004 - shown} of 1004 changed keys are not shown" in markdown


def copy_package(repo: Path) -> Path:
    target = repo / "infercrane_pulumi"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(
        ROOT / "infercrane_pulumi", target, ignore=shutil.ignore_patterns("__pycache__")
    )
    return target


def test_when_the_program_changed_the_base_is_rendered_by_the_base_code(tmp_path: Path) -> None:
    repo = new_repo(tmp_path / "repo")
    write_stack(repo, BASE_REPLICAS[:2])
    manifests = copy_package(repo) / "objects" / "deployment.py"
    manifests.write_text(
        manifests.read_text().replace(
            '"progressDeadlineSeconds": progress_deadline_seconds(settings, intent)',
            '"progressDeadlineSeconds": 600',
        )
    )
    commit(repo, "base: older program")
    copy_package(repo)  # head: this program; the stack file is unchanged
    data, _ = diff_json(base="HEAD", configs=[Path(STACK)], repo=repo)
    SCHEMA.validate(data)
    deadline = " spec:\n-  progressDeadlineSeconds: 600\n+  progressDeadlineSeconds: 2400\n"
    assert [
        (r["externalKey"], [(o["kind"], o["change"], o["diff"]) for o in r["objects"]])
        for r in data[0]["replicas"]
    ] == [
        (key, [("Deployment", "update", deadline), ("Service", "same", "")])
        for key in ("changed", "kept")
    ]
    assert data[0]["notes"] == [
        "The program changed since base HEAD: the base is rendered with its own code."
    ]


def test_the_base_code_s_refusals_and_crashes_are_one_line_naming_the_base(
    tmp_path: Path,
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_stack(repo, [samples.replica(port=0)])
    commands = copy_package(repo) / "cli" / "commands.py"
    commit(repo, "base: an invalid stack")
    write_stack(repo, [samples.replica()])
    (repo / "infercrane_pulumi" / "README").write_text("the program differs at head")
    with pytest.raises(ConfigError) as refused:
        diff_json(base="HEAD", configs=[Path(STACK)], repo=repo)
    assert refused.value.problems == (
        f"base HEAD: {STACK}: infercrane:replicas[0].port: Input should be greater than or "
        "equal to 1",
    )
    commands.write_text("def broken(:\n")
    commit(repo, "base: a program that cannot start")
    copy_package(repo)  # head: this program again
    with pytest.raises(ConfigError) as crashed:
        diff_json(base="HEAD", configs=[Path(STACK)], repo=repo)
    [problem] = crashed.value.problems
    assert problem.startswith(f"base HEAD: {STACK}: the program at base failed to render (exit 1):")
    assert problem.endswith("SyntaxError: invalid syntax")


@pytest.mark.parametrize(
    ("side", "replicas"),
    [("base", [samples.replica(port=0)]), ("head", [samples.replica(port=0)])],
)
def test_an_invalid_stack_names_its_side_and_field(
    tmp_path: Path, side: str, replicas: Any
) -> None:
    repo = new_repo(tmp_path / "repo")
    write_stack(repo, replicas if side == "base" else [samples.replica()])
    commit(repo, "base")
    write_stack(repo, replicas if side == "head" else [samples.replica()])
    with pytest.raises(ConfigError) as refused:
        diff_json(base="main", configs=[Path(STACK)], repo=repo)
    prefix = "base main" if side == "base" else "head"
    assert refused.value.problems == (
        f"{prefix}: {STACK}: infercrane:replicas[0].port: Input should be greater than or "
        "equal to 1",
    )


def test_unreadable_yaml_at_head_is_named_once(repo: Path) -> None:
    (repo / STACK).write_text("config: [unclosed\n")
    with pytest.raises(ConfigError) as refused:
        diff_json(base="base", configs=[Path(STACK)], repo=repo)
    assert refused.value.problems == (f"head: {STACK}: not valid YAML",)


def test_bad_places_and_refs_are_one_line_each(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    outside = tmp_path / "Pulumi.outside.yaml"
    cases: list[tuple[dict[str, Any], str]] = [
        ({"base": "no-such-ref"}, f"base no-such-ref: no such commit in {repo.resolve()}"),
        ({"repo": plain}, f"{plain}: not a git repository"),
        ({"repo": tmp_path / "absent"}, f"{tmp_path / 'absent'}: not a git repository"),
        (
            {"configs": [Path("stacks/Pulumi.nowhere.yaml")]},
            "stacks/Pulumi.nowhere.yaml: absent at base base and at head",
        ),
        ({"configs": [outside]}, f"{outside}: not inside the repository {repo.resolve()}"),
        ({"configs": [Path("Pulumi.yaml")]}, "Pulumi.yaml: not a stack file (Pulumi.<stack>.yaml)"),
    ]
    for overrides, problem in cases:
        arguments: dict[str, Any] = {"base": "base", "configs": [Path(STACK)], "repo": repo}
        with pytest.raises(ConfigError) as refused:
            diff_json(**(arguments | overrides))
        assert refused.value.problems == (problem,), overrides
