"""Which of a stack's resources a run asks the engine to work on, by URN.

When some keys are verified unchanged (``cluster.verdict``) and others are not, the run
targets only the others: the engine neither diffs nor touches an untargeted resource, and keeps
one the program does not register as the state holds it, so the program registers only the
targeted keys (``handoff.Carried``). Targeted are each worked-on key's component and objects.
Never the stack's provider or the stack itself: the engine always works on both (the
provider's settings may have changed; the stack's outputs record every key), and naming either
would make every resource under it a target, deleted if left unregistered. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from infercrane_pulumi.config.intents import KubernetesSettings
from infercrane_pulumi.objects import naming, workloads


def owners(
    *, project: str, stack: str, settings: KubernetesSettings, keys: Iterable[str]
) -> dict[str, str]:
    """Each key's component and object URNs, in key order, to the key: what a run that works
    on ``keys`` targets."""
    prefix = f"urn:pulumi:{stack}::{project}::{naming.REPLICA_TYPE}"
    kinds = workloads.workload_api(settings).kinds
    found: dict[str, str] = {}
    for key in sorted(keys):
        found[f"{prefix}::{naming.object_name(key)}"] = key
        for kind in kinds:
            found[f"{prefix}${kind.pulumi_type}::{naming.child_name(key, kind.kind)}"] = key
    return found
