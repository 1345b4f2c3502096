"""Has the cluster drifted from what the stack last applied? One metadata snapshot instead of a
refresh.

Pulumi's refresh reads every object of the stack before every run: at a thousand intents that is
two thousand GETs and as many engine steps, to find what is usually nothing. What a refresh finds
that the preflight does not is an object of ours that is gone, or that no longer carries the
intent that was applied to it; a foreign object at our name or a foreign owner of our fields is
refused by the preflight either way. So a driver reads the namespace's metadata once
(``preflight.snapshot``, the same read its ownership decision uses) and refreshes, fully, only
when this finds drift. Pure.
"""

from __future__ import annotations

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.cluster.client import subject
from infercrane_pulumi.cluster.preflight import Snapshot
from infercrane_pulumi.intents import StackConfig


def drift(applied: StackConfig, live: Snapshot) -> list[str]:
    """What differs between the applied objects and the live metadata, by kind and name."""
    settings = applied.kubernetes
    kinds = workloads.workload_api(settings).kinds
    found = []
    for intent in applied.replicas:
        applied_hash = naming.intent_hash(settings, intent)
        name = naming.object_name(intent.external_key)
        for kind in kinds:
            meta = live[kind.kind].get(name)
            what = subject(kind.kind, settings.namespace, name)
            if meta is None:
                found.append(f"{what}: gone")
            elif (meta.get("annotations") or {}).get(naming.ANNOTATION_INTENT_HASH) != applied_hash:
                found.append(f"{what}: carries another intent than the one applied")
    return found
