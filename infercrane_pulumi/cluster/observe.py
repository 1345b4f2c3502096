"""Observation: what the cluster says about each replica of a stack, read fresh every time.

Lists the exactly-ours objects of the namespace (and its Pods, when this identity may list them:
the shipped provider Role may not, see ``deploy/kubernetes/observe/``), groups them by external
key and applies the workload API's readiness rule. Keys of the stack come first, in stack order;
exactly-ours objects whose key is not in the stack follow as ``orphaned``. The stack is what it
applied, as its state says (``automation.stacks.observe_applied``, the one rule of ``inspect``
and ``NamespaceStack.observe``), never a file's pending edits. The objects are read fresh every
time and nothing is cached, so a fresh process sees what any other process would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infercrane_pulumi.cluster import verdict
from infercrane_pulumi.cluster.api import Cluster
from infercrane_pulumi.config.intents import ReplicaIntent, StackConfig
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.kinds import POD
from infercrane_pulumi.objects.readiness import Readiness, State
from infercrane_pulumi.objects.workloadapi import WorkloadApi


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Replicas:
    desired: int
    updated: int
    ready: int
    available: int


@dataclass(frozen=True)
class ObservedObject:
    kind: str
    name: str
    uid: str
    generation: int | None
    observed_generation: int | None
    replicas: Replicas | None
    conditions: tuple[Condition, ...]
    field_managers: tuple[str, ...]  # "manager(Operation)", sorted


@dataclass(frozen=True)
class ReplicaObservation:
    external_key: str
    state: State
    reason: str
    endpoint: str | None
    objects: tuple[ObservedObject, ...]


def observed_object(raw: Mapping[str, Any]) -> ObservedObject:
    meta = raw.get("metadata") or {}
    status = raw.get("status") or {}
    spec = raw.get("spec") or {}
    replicas = None
    if "replicas" in spec:  # a scalable workload (Deployment)
        replicas = Replicas(
            desired=int(spec.get("replicas") or 0),
            updated=int(status.get("updatedReplicas") or 0),
            ready=int(status.get("readyReplicas") or 0),
            available=int(status.get("availableReplicas") or 0),
        )
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    return ObservedObject(
        kind=str(raw.get("kind")),
        name=str(meta.get("name")),
        uid=str(meta.get("uid")),
        generation=None if generation is None else int(generation),
        observed_generation=None if observed is None else int(observed),
        replicas=replicas,
        conditions=tuple(
            Condition(
                type=str(c.get("type", "")),
                status=str(c.get("status", "")),
                reason=str(c.get("reason", "")),
                message=str(c.get("message", "")),
            )
            for c in status.get("conditions") or []
        ),
        field_managers=tuple(
            sorted(
                {f"{e.get('manager')}({e.get('operation')})" for e in meta.get("managedFields", [])}
            )
        ),
    )


def replica_observation(
    api: WorkloadApi,
    intent: ReplicaIntent,
    *,
    desired_hash: str,
    endpoint: str,
    objects: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] | None,
) -> ReplicaObservation:
    """One stack key's state from its live objects and Pods (None: unreadable), pure."""
    by_kind = {obj["kind"]: obj for obj in objects}
    missing = [kind.kind for kind in api.kinds if kind.kind not in by_kind]
    if not by_kind:
        readiness = Readiness("absent", "no object of this key exists")
    elif missing:
        why = f"missing: {', '.join(missing)}; the next up recreates it"
        readiness = Readiness("degraded", why)
    else:
        readiness = api.readiness(by_kind[api.workload_kind.kind], desired_hash, pods)
    workload = by_kind.get(api.workload_kind.kind) or {}
    served_at = ((workload.get("status") or {}).get("address") or {}).get("url")
    return ReplicaObservation(
        external_key=intent.external_key,
        state=readiness.state,
        reason=readiness.reason,
        endpoint=str(served_at or endpoint),
        objects=tuple(observed_object(obj) for obj in objects),
    )


def observe(
    cluster: Cluster, config: StackConfig, keys: Sequence[str] | None = None
) -> list[ReplicaObservation]:
    """Every key of ``config`` (what the stack applied; or just ``keys``), then orphans;
    states as ``readiness`` decides."""
    settings = config.kubernetes
    api = workloads.workload_api(settings)
    grouped: dict[str, list[dict[str, Any]]] = {}
    for kind in api.kinds:
        for item in cluster.select(kind, settings.namespace, naming.OWNED_SELECTOR):
            key = verdict.owner_key(item.get("metadata") or {}, settings.namespace)
            if key is not None:
                grouped.setdefault(key, []).append(item)
    pods = cluster.list_if_allowed(POD, settings.namespace, naming.OWNED_SELECTOR)
    wanted = [i for i in config.replicas if keys is None or i.external_key in keys]
    found = [
        replica_observation(
            api,
            intent,
            desired_hash=naming.intent_hash(settings, intent),
            endpoint=api.endpoint(settings, intent),
            objects=grouped.get(intent.external_key, []),
            pods=None
            if pods is None
            else [p for p in pods if _key_hash(p) == naming.key_hash(intent.external_key)],
        )
        for intent in wanted
    ]
    stack_keys = {i.external_key for i in config.replicas}
    others = sorted(grouped) if keys is None else [k for k in keys if k not in stack_keys]
    return found + [
        _not_in_stack(key, grouped.get(key, [])) for key in others if key not in stack_keys
    ]


def _not_in_stack(key: str, objects: Sequence[Mapping[str, Any]]) -> ReplicaObservation:
    if not objects:
        return ReplicaObservation(
            key, "absent", "not in the stack, and no object of it exists", None, ()
        )
    return ReplicaObservation(
        external_key=key,
        state="orphaned",
        reason="exactly ours, but its key is not in the stack; the next up deletes it only if "
        "this stack created it",
        endpoint=None,
        objects=tuple(observed_object(obj) for obj in objects),
    )


def _key_hash(pod: Mapping[str, Any]) -> str | None:
    labels: Mapping[str, str] = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get(naming.LABEL_KEY_HASH)


def conditions_summary(obj: ObservedObject) -> str:
    """Raw conditions as ``Type=Status`` pairs, the way inspect and the demo show them."""
    return ",".join(f"{c.type}={c.status}" for c in obj.conditions) or "-"
