"""Which of a stack's resources a run asks the engine to work on, by URN.

When some keys are verified unchanged (``cluster.unchanged``) and others are not, the run
targets only the others: the program still registers every intent (nothing untargeted is
deleted), but the engine neither diffs nor touches an untargeted resource, and the provider's
diff of each one is a server-side dry-run against the API server. Targeted are each worked-on
key's component and objects, the stack's provider (its settings may have changed) and the
stack itself (its outputs record every key). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.intents import KubernetesSettings


def urns(
    *, project: str, stack: str, settings: KubernetesSettings, keys: Iterable[str]
) -> list[str]:
    """The URNs of the stack's root, its provider, and each key's component and objects."""
    prefix = f"urn:pulumi:{stack}::{project}::"
    return [
        f"{prefix}pulumi:pulumi:Stack::{project}-{stack}",
        f"{prefix}pulumi:providers:kubernetes::{naming.provider_name(settings)}",
        *owners(project=project, stack=stack, settings=settings, keys=keys),
    ]


def owners(
    *, project: str, stack: str, settings: KubernetesSettings, keys: Iterable[str]
) -> dict[str, str]:
    """Each key's component and object URNs, in key order, to the key."""
    prefix = f"urn:pulumi:{stack}::{project}::{naming.REPLICA_TYPE}"
    kinds = workloads.workload_api(settings).kinds
    found: dict[str, str] = {}
    for key in sorted(keys):
        found[f"{prefix}::{naming.object_name(key)}"] = key
        for kind in kinds:
            found[f"{prefix}${kind.pulumi_type}::{naming.child_name(key, kind.kind)}"] = key
    return found
