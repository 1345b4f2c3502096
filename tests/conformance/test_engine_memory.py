"""The CLI's soft memory limit as real runs set it (``engine.memory``): sized to the resources
the stack holds while the run works, the ones it removes included, in the CLI and the plugins
it starts; and never over the operator's own collector settings.

Read where it counts: the environment of the live processes, from ``/proc``, while the engine
runs. The moment is the served program's own: once the replicas it registered have been created
(their records resolve), while the engine still waits for the program to finish, so the CLI
and its plugin are alive by construction. An engine event is no such moment: the run path reads
events from the CLI's event log as it is written, so a step's event can be handed over after
the CLI has exited; once in a full run, the third ``up`` saw no engine process at all.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pulumi
import pytest

from infercrane_dev.localcluster.processes import descendants
from infercrane_pulumi.automation.engine.memory import BASE_MIB, PER_RESOURCE_KIB
from infercrane_pulumi.program.records import REPLICAS_OUTPUT
from tests.conformance.harness import Harness, replica

ENGINE = ("pulumi", "pulumi-resource")  # /proc/<pid>/comm cuts names at 15 characters


def collector_settings() -> dict[str, dict[str, str]]:
    """Per engine process below this one (by its name): its GOGC and GOMEMLIMIT."""
    found: dict[str, dict[str, str]] = {}
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            if name in ENGINE:
                environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                pairs = (entry.decode().partition("=") for entry in environ if entry)
                found[name] = {k: v for k, _, v in pairs if k in ("GOGC", "GOMEMLIMIT")}
    return found


def up_seen(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """An up of the stack file; what its engine processes held once the served program's
    replicas were created (the program exports their records, resolved then)."""
    seen: dict[str, dict[str, str]] = {}
    export = pulumi.export

    def looking(name: str, value: Any) -> None:
        export(name, value)
        if name == REPLICAS_OUTPUT:
            pulumi.Output.from_input(value).apply(lambda _: seen.update(collector_settings()))

    with monkeypatch.context() as patched:
        patched.setattr(pulumi, "export", looking)
        harness.up()
    return seen


def limit(resources: int) -> str:
    kib = BASE_MIB * 1024 + PER_RESOURCE_KIB * resources
    return f"{(kib + 1023) // 1024}MiB"


def test_the_limit_grows_with_what_the_stack_holds_and_the_operators_own_wins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GOGC", raising=False)
    monkeypatch.delenv("GOMEMLIMIT", raising=False)
    # The stack and its provider, and each key's component, Deployment and Service.
    harness.configure([replica("mem-a"), replica("mem-b")])
    both = {"GOMEMLIMIT": limit(2 + 2 * 3)}
    assert up_seen(harness, monkeypatch) == {"pulumi": both, "pulumi-resource": both}

    # The stack still holds mem-b while the run that removes it works; a changed key (mem-a's
    # port) makes the run go to the engine at all.
    harness.configure([replica("mem-a", port=8081), replica("mem-c")])
    three = {"GOMEMLIMIT": limit(2 + 3 * 3)}
    assert up_seen(harness, monkeypatch) == {"pulumi": three, "pulumi-resource": three}

    monkeypatch.setenv("GOGC", "150")
    harness.configure([replica("mem-a", port=8082), replica("mem-c")])
    own = {"GOGC": "150"}
    assert up_seen(harness, monkeypatch) == {"pulumi": own, "pulumi-resource": own}
