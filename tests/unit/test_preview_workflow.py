"""The PR workflow's security properties, read from its YAML: pinned actions, least permissions,
no fork ever reaching the credentials, secrets only through env and never printed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from infercrane_pulumi.review import comments

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW_FILE = ROOT / ".github" / "workflows" / "preview.yml"
ACTION_FILE = ROOT / ".github" / "actions" / "pr-comment" / "action.yml"
WORKFLOW: dict[Any, Any] = yaml.safe_load(WORKFLOW_FILE.read_text())
JOBS: dict[str, Any] = WORKFLOW["jobs"]
SAME_REPOSITORY = "github.event.pull_request.head.repo.full_name == github.repository"
SECRET_VARIABLES = ("KUBECONFIG_DATA", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_BACKEND_URL")
PINNED = re.compile(r"^\s*(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def steps(job: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = JOBS[job]["steps"]
    return found


def run_lines() -> list[str]:
    return [
        line.strip()
        for job in JOBS
        for step in steps(job)
        for line in str(step.get("run", "")).splitlines()
    ]


def test_every_action_is_a_local_one_or_pinned_by_commit_sha_with_its_version() -> None:
    for path in (WORKFLOW_FILE, ACTION_FILE):
        uses = [line for line in path.read_text().splitlines() if "uses:" in line]
        remote = [line for line in uses if "uses: ./" not in line]
        assert [line for line in remote if not PINNED.match(line)] == [], path
    assert {s["uses"] for job in JOBS for s in steps(job) if "uses" in s} == {
        "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1",
        "actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97",
        "pulumi/actions@8e5e406f4007fca908480587cb9893c07090f58d",
        "./.github/actions/pr-comment",
    }


def test_permissions_are_none_by_default_and_minimal_per_job() -> None:
    assert WORKFLOW["permissions"] == {}
    assert {job: JOBS[job]["permissions"] for job in JOBS} == {
        "diff": {"contents": "read", "pull-requests": "write"},
        "stacks": {"contents": "read"},
        "preview": {"contents": "read", "pull-requests": "write"},
    }


def test_it_runs_on_pull_requests_touching_the_program_stacks_or_manifests() -> None:
    trigger: dict[str, Any] = WORKFLOW[True]  # YAML 1.1 reads the bare key `on` as true
    assert set(trigger) == {"pull_request"}
    assert {"infercrane_pulumi/**", "stacks/**", "deploy/**"} <= set(
        trigger["pull_request"]["paths"]
    )
    assert WORKFLOW["concurrency"] == {
        "group": "preview-${{ github.event.pull_request.number }}",
        "cancel-in-progress": True,
    }


def test_the_offline_diff_runs_for_forks_too_and_never_sees_a_secret() -> None:
    diff = JOBS["diff"]
    assert "if" not in diff
    assert "secrets." not in yaml.safe_dump(diff)
    [command] = [s["run"] for s in steps("diff") if "infercrane_pulumi diff" in s.get("run", "")]
    assert (
        'python -m infercrane_pulumi diff --all --base "origin/$BASE_REF" --format markdown '
        '--policy-gate > "$RUNNER_TEMP/diff.md" || status=$?'
        in " ".join(command.replace("\\\n", "").split())
    )
    # The comment is posted whatever the policy says; the job fails last, on exit 5 only.
    names = [s.get("name") for s in steps("diff")]
    assert names[-2:] == [
        "Post or update the diff comment",
        "Fail on a new mandatory policy violation",
    ]
    assert steps("diff")[-1]["if"] == "steps.diff.outputs.status == '5'"
    # A fork's token cannot write comments: only a same-repository PR's run posts one.
    [post] = [s for s in steps("diff") if s.get("uses") == "./.github/actions/pr-comment"]
    assert post["if"] == SAME_REPOSITORY


def test_credentials_reach_only_same_repository_prs_through_step_env() -> None:
    assert JOBS["preview"]["if"] == f"{SAME_REPOSITORY} && needs.stacks.outputs.stacks != '[]'"
    assert JOBS["stacks"]["if"] == SAME_REPOSITORY
    assert JOBS["preview"]["needs"] == "stacks"
    assert JOBS["preview"]["strategy"]["matrix"] == {
        "stack": "${{ fromJSON(needs.stacks.outputs.stacks) }}"
    }
    secret_env = {
        name: value
        for step in steps("preview")
        for name, value in (step.get("env") or {}).items()
        if "secrets." in value
    }
    assert secret_env == {name: f"${{{{ secrets.{name} }}}}" for name in SECRET_VARIABLES}
    assert not [line for line in run_lines() if "secrets." in line]


def test_no_secret_is_ever_printed_and_the_kubeconfig_file_is_private() -> None:
    for line in run_lines():
        if any(f"${name}" in line for name in SECRET_VARIABLES):
            assert not line.startswith(("echo", "cat")) and "set -x" not in line, line
            assert re.fullmatch(r"printf '%s' \"\$\w+\" > \"\$RUNNER_TEMP/\w+\"", line), line
    [write] = [s["run"] for s in steps("preview") if "KUBECONFIG_DATA" in s.get("run", "")]
    assert write.splitlines()[0] == "umask 077"
    assert 'chmod 600 "$RUNNER_TEMP/kubeconfig"' in write
    assert not [s for s in steps("preview") if "with" in s and "secrets." in str(s["with"])]


def test_checkouts_keep_no_credentials_and_the_pulumi_cli_is_pinned() -> None:
    checkouts = [s for job in JOBS for s in steps(job) if "actions/checkout@" in s.get("uses", "")]
    assert len(checkouts) == 3
    assert all(s["with"]["persist-credentials"] is False for s in checkouts)
    [pulumi] = [s for s in steps("preview") if "pulumi/actions@" in s.get("uses", "")]
    assert pulumi["with"] == {"pulumi-version": "3.274.0"}
    [preview] = [
        s["run"] for s in steps("preview") if "infercrane_pulumi preview" in s.get("run", "")
    ]
    assert preview.replace("\\\n", " ").split() == [
        *("python", "-m", "infercrane_pulumi", "preview", "--stack", '"$STACK"'),
        *("--policy-pack", "policy", "--format", "markdown", ">", '"$RUNNER_TEMP/preview.md"'),
    ]
    # The pack runs in its own pinned virtualenv, made the one way the Makefile makes it.
    assert [s["run"] for s in steps("preview") if "policy-venv" in s.get("run", "")] == [
        "make policy-venv PYTHON=python"
    ]
    assert [
        s["run"]
        for job in ("diff", "preview")
        for s in steps(job)
        if "pip install" in s.get("run", "")
    ] == ["python -m pip install --disable-pip-version-check -c constraints.txt -e ."] * 2


def test_the_comment_action_finds_its_comment_by_heading_and_knows_the_no_change_marker() -> None:
    action = ACTION_FILE.read_text()
    assert comments.NO_CHANGES_MARKER in action
    assert 'select(.user.login == "github-actions[bot]")' in action
    assert yaml.safe_load(action)["inputs"]["body-file"]["required"] is True


def test_the_secrets_live_in_the_preview_environment_that_only_the_preview_job_names() -> None:
    environments = {job: spec.get("environment") for job, spec in JOBS.items()}
    assert environments == {"diff": None, "stacks": None, "preview": "preview"}
    uses_secrets = {job for job, spec in JOBS.items() if "secrets." in yaml.safe_dump(spec)}
    assert uses_secrets == {"preview"}
