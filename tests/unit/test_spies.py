"""A spy counts at the definition: a call made through a by-name import, which a patch of the
module's attribute never sees, is recorded with what it returned; undone, nothing is."""

from __future__ import annotations

import pytest

from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.workloads import render
from infercrane_pulumi.policy import rules
from tests.spies import Call, spy
from tests.unit import fake_cluster


def test_a_render_through_a_by_name_import_is_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    config = fake_cluster.config()
    expected = {stack: render(config, stack=stack) for stack in (None, "s")}
    with monkeypatch.context() as patched:
        calls = spy(patched, workloads.render)
        rules.evaluate_stack(config)  # `policy.rules` imported `render` by name
        render(config, stack="s")  # so did this module
        assert calls == [
            Call((config,), {"stack": None}, expected[None]),
            Call((config,), {"stack": "s"}, expected["s"]),
        ]
    render(config, stack="s")
    assert len(calls) == 2
