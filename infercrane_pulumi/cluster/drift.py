"""Has the cluster drifted from what the stack last applied? Two LISTs instead of a refresh.

Pulumi's refresh reads every object of the stack before every run: at a thousand intents that is
two thousand GETs and as many engine steps, to find what is usually nothing. What a refresh finds
that the preflight does not is an object of ours that is gone, or that no longer carries the
intent that was applied to it; a foreign object at our name or a foreign owner of our fields is
refused by the preflight either way. So the drivers list the objects' metadata, and refresh
(fully, as before) only when this finds drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.cluster.client import Cluster, subject
from infercrane_pulumi.intents import StackConfig


def drift(applied: StackConfig, live: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """What differs between the applied objects and the live metadata, by kind and name."""
    settings = applied.kubernetes
    found = []
    for intent in applied.replicas:
        applied_hash = naming.intent_hash(settings, intent)
        for obj in workloads.replica_objects(settings, intent):
            name = obj["metadata"]["name"]
            meta = live[obj["kind"]].get(name)
            what = subject(obj["kind"], settings.namespace, name)
            if meta is None:
                found.append(f"{what}: gone")
                continue
            annotations = meta.get("annotations") or {}
            if annotations.get(naming.ANNOTATION_INTENT_HASH) != applied_hash:
                found.append(f"{what}: carries another intent than the one applied")
    return found


def probe(cluster: Cluster, applied: StackConfig) -> list[str]:
    """``drift`` of the live cluster (one metadata LIST per owned kind)."""
    if not applied.replicas:
        return []
    kinds = workloads.workload_api(applied.kubernetes).kinds
    namespace = applied.kubernetes.namespace
    return drift(applied, {kind.kind: cluster.metadata(kind, namespace) for kind in kinds})
