"""InferCrane's CrossGuard pack through the real engine: the pinned CLI starts it through the
hermetic language host's ``RunPlugin``. A person's ``pulumi up --policy-pack`` is refused before
any write by a mandatory rule the stack's own policy lets through; advisory findings are the
engine's policy events and the run goes on; and the pack names what the offline diff's rules
name for the same change."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from infercrane_pulumi.automation import PolicyPack, policypack
from infercrane_pulumi.config.intents import PolicySettings
from infercrane_pulumi.errors import PolicyViolationError
from infercrane_pulumi.objects import kinds
from infercrane_pulumi.policy import crossguard
from infercrane_pulumi.policy.rules import Finding
from infercrane_pulumi.review.changes import PolicyFinding
from tests.conformance.harness import ENGINE_CLIS, ROOT, Harness, intent, replica, unavailable
from tests.conformance.test_exact_deletion import by_hand
from tests.unit import gitrepos

pytestmark = pytest.mark.conformance

PACK = ROOT / "policy"
# The namespace allows what the pack's defaults deny.
TRUSTED = {"allowedFlags": ["--trust-remote-code"]}


@pytest.fixture
def pack() -> Path:
    if not (PACK / "venv" / "bin" / "python").exists():
        unavailable(f"the policy pack's virtualenv {PACK / 'venv'} is missing (make policy-venv)")
    return PACK


def _policy_events(harness: Harness, tmp_path: Path, *command: str) -> tuple[Any, list[Any]]:
    """A person's ``pulumi <command>``; the run and the pack's findings, each as
    (rule, enforcement, message)."""
    events: list[auto.PolicyEvent] = []
    harness.stack()  # created, as a person would have with `pulumi stack init`

    def judged(event: auto.EngineEvent) -> None:
        if event.policy_event is not None:
            events.append(event.policy_event)

    done = by_hand(harness, tmp_path, *command, on_event=judged, check=False)
    found = [(f.rule, f.enforcement, f.message) for f in policypack.findings(events, {})]
    return done, sorted(found)


def test_the_pack_refuses_what_the_stack_allows_before_any_write(
    harness: Harness, tmp_path: Path, pack: Path
) -> None:
    harness.configure(
        [replica("pack-a", runtimeArgs=["--trust-remote-code"]), replica("pack-b")], policy=TRUSTED
    )
    done, found = _policy_events(harness, tmp_path, "up", "--yes", "--policy-pack", str(pack))
    assert done.returncode != 0
    assert found == [
        ("runtime-flags", "mandatory", "pack-a: --trust-remote-code is in the runtime's argv")
    ]
    assert harness.owned(kinds.DEPLOYMENT) == []
    assert harness.owned(kinds.SERVICE) == []


def test_advisory_findings_are_the_engines_and_match_the_offline_diff(
    harness: Harness, tmp_path: Path, pack: Path
) -> None:
    limits = {
        "allowedRegistries": ["ghcr.io/acme"],
        "gpuProducts": ["NVIDIA-A100"],
        "gpuBudget": 1,
        "podSecurity": "restricted",
        "allowedSecrets": ["hf-token"],
    }
    replicas = [replica("pack-a", runtimeArgs=["--trust-remote-code"]), replica("pack-b")]
    # The stack's own policy: the same limits, every rule advisory.
    advisory = dict.fromkeys(crossguard.SETTINGS_OF, "advisory")
    harness.configure(replicas, policy={**limits, "enforcement": advisory})
    config = tmp_path / "pack-config.json"
    config.write_text(
        json.dumps(
            {
                rule: {"enforcementLevel": "advisory"}
                | {name: limits[name] for name in names if name in limits}
                for rule, names in crossguard.SETTINGS_OF.items()
            }
        )
    )
    done, found = _policy_events(
        harness,
        tmp_path,
        *("up", "--yes", "--skip-preview", "--policy-pack", str(pack)),
        *("--policy-pack-config", str(config)),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert harness.get(kinds.DEPLOYMENT, "pack-a") is not None
    # The same change as a pull request shows it: the stack file added to a repository.
    repo = gitrepos.new_repo(tmp_path / "repo")
    gitrepos.commit(repo, "base")
    target = repo / harness.stack_file.relative_to(harness.project_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(harness.stack_file.read_text())
    gitrepos.commit(repo, "head")
    [stack], _ = gitrepos.diff_json(base="HEAD~1", configs=None, repo=repo)
    offline = [
        (f["rule"], f["enforcement"], f["message"])
        for f in [*(f for r in stack["replicas"] for f in r["policy"]), *stack["policy"]]
    ]
    # Every pack rule had something to say; the engine's (with the preview's) name each once.
    assert {rule for rule, _, _ in offline} == set(crossguard.SETTINGS_OF)
    assert sorted(set(found)) == sorted(offline)
    harness.destroy()


@pytest.mark.parametrize("harness", ENGINE_CLIS, indirect=True)
def test_namespace_stack_runs_the_pack_on_every_ensure(
    harness: Harness, tmp_path: Path, pack: Path
) -> None:
    stack = dataclasses.replace(
        harness.namespace_stack(tmp_path / "workspace"),
        policy=PolicySettings.model_validate(TRUSTED),
        policy_pack=PolicyPack(pack),
    )
    flagged = intent("pack-a", runtimeArgs=["--trust-remote-code"])
    with pytest.raises(PolicyViolationError) as refused:
        stack.ensure([flagged, intent("pack-b")])
    message = "pack-a: --trust-remote-code is in the runtime's argv"
    assert refused.value.problems == (message,)
    assert harness.owned(kinds.DEPLOYMENT) == []
    assert harness.owned(kinds.SERVICE) == []
    config = tmp_path / "advisory.json"
    config.write_text(json.dumps({"runtime-flags": "advisory"}))
    advisory = dataclasses.replace(stack, policy_pack=PolicyPack(pack, config))
    expected = (PolicyFinding(Finding("runtime-flags", "advisory", "pack-a", message)),)
    result = advisory.ensure([flagged])
    assert result.policy == expected
    assert harness.get(kinds.DEPLOYMENT, "pack-a") is not None
    # Nothing changed, and still judged: with a pack, no run is a verified no-op.
    again = advisory.ensure([flagged])
    assert (again.policy, again.verified_unchanged) == (expected, False)
    # Tightened again, the same unchanged stack is refused; what it holds stays.
    applied = harness.written()  # ours, not the controllers' status writes
    with pytest.raises(PolicyViolationError):
        stack.ensure([flagged])
    assert harness.written() == applied
    stack.destroy()
