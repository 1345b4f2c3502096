"""One run renders the stack's objects once and judges its policy once, whatever it does: the
driver's policy, its verdict over the cluster and the program it serves all take the one
rendering and the one judgement (issue 41). Counted in this process, where the program is
served."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.policy import rules
from tests.conformance.harness import Harness, intent
from tests.spies import Call, spy

pytestmark = pytest.mark.conformance


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Call]]:
    """Each render of a stack and each evaluation of its policy, by whatever module makes it
    (``automation.stacks`` and ``policy.rules`` import ``render`` by name): counted where each
    is defined."""
    return {
        "render": spy(monkeypatch, workloads.render),
        "policy": spy(monkeypatch, rules.evaluate_rendered),
    }


def counts(calls: dict[str, list[Call]]) -> dict[str, int]:
    """How many calls of each were made since the last count; the count starts again."""
    counted = {name: len(made) for name, made in calls.items()}
    for made in calls.values():
        made.clear()
    return counted


def test_every_run_renders_once_and_judges_its_policy_once(
    harness: Harness, calls: dict[str, list[Call]], tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "workspace")
    keys = [intent(f"once-{i}") for i in range(3)]
    runs: list[tuple[str, Callable[[], object]]] = [
        ("first ensure", lambda: stack.ensure(keys)),
        ("verified no-op", lambda: stack.ensure(keys)),
        ("add one (targeted)", lambda: stack.ensure([*keys, intent("once-3")])),
        ("preview of a change", lambda: stack.preview([intent("once-0", modelRevision="r2")])),
        ("remove", lambda: stack.remove("once-3")),
    ]
    counts(calls)  # what opening the stack made
    for what, operation in runs:
        operation()
        assert counts(calls) == {"render": 1, "policy": 1}, what
    stack.destroy()
    # A destroy judges no policy: it applies nothing.
    assert counts(calls) == {"render": 1, "policy": 0}


def test_a_run_says_why_it_worked_on_each_key_and_on_none_other(
    harness: Harness, tmp_path: Path
) -> None:
    stack = harness.namespace_stack(tmp_path / "workspace")
    stack.ensure([intent("why-a"), intent("why-b")])
    result = stack.ensure([intent("why-a"), intent("why-b", modelRevision="r2"), intent("why-c")])
    reasons = {r.external_key: r.reasons for r in result.replicas}

    def why(key: str, reason: str) -> tuple[str, ...]:
        name = naming.object_name(key)
        return tuple(
            f"{kind}/{harness.namespace}/{name}: apply: {reason}"
            for kind in ("Deployment", "Service")
        )

    assert reasons == {
        "why-a": (),  # verified unchanged: the engine left it alone
        "why-b": why("why-b", "its annotations differ from ours"),  # another intent's hash
        "why-c": why("why-c", "absent"),
    }
