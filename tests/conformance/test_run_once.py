"""One run renders the stack's objects once and judges its policy once, whatever it does: the
driver's policy, its verdict over the cluster and the program it serves all take the one
rendering and the one judgement (issue 41). Counted in this process, where the program is
served."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.policy import rules
from tests.conformance.harness import Harness, intent

pytestmark = pytest.mark.conformance


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How often each run renders the stack and evaluates its policy."""
    counted: Counter[str] = Counter()

    def counting(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return function(*args, **kwargs)

        return call

    monkeypatch.setattr(workloads, "render", counting("render", workloads.render))
    monkeypatch.setattr(rules, "evaluate_rendered", counting("policy", rules.evaluate_rendered))
    yield counted


def test_every_run_renders_once_and_judges_its_policy_once(
    harness: Harness, calls: Counter[str], tmp_path: Path
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
    for what, operation in runs:
        calls.clear()
        operation()
        assert dict(calls) == {"render": 1, "policy": 1}, what
    calls.clear()
    stack.destroy()
    assert dict(calls) == {"render": 1}  # a destroy judges no policy: it applies nothing


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
