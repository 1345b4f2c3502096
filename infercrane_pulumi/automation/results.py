"""What a run did (or would do), per external key, taken from the engine's events.

The engine reports each step on a resource as a structured event: the operation, the resource's
type and URN, its old and new inputs and outputs, and the properties that differ. Our objects
carry their external key in an annotation, so every step maps to the key that owns it without
parsing any text. Steps of the refresh that precedes each run are kept apart as drift: what the
cluster changed behind Pulumi's back, not what this run proposes. Pure: events in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi import naming, workloads, yamldiff
from infercrane_pulumi.changes import (
    SEVERITY,
    Change,
    Drift,
    KeyChange,
    ObjectDiff,
    StackChanges,
    Summary,
    find_renames,
    key_change,
)
from infercrane_pulumi.intents import StackConfig

EngineEvent = auto.EngineEvent

_OBJECT_CHANGES: Mapping[str, Change] = {
    "same": "same",
    "create": "create",
    "import": "create",
    "update": "update",
    "delete": "delete",
    "replace": "replace",
    "create-replacement": "replace",
    "delete-replaced": "replace",
}
# When one resource has several steps (a replacement), the strongest one names the change.
_STRENGTH: Mapping[Change, int] = {"same": 0, "update": 1, "create": 2, "delete": 2, "replace": 3}


@dataclass(frozen=True)
class Step:
    """One engine step on one Kubernetes object of ours."""

    op: str
    urn: str
    kind: str
    name: str
    external_key: str
    uid: str | None
    fields: tuple[str, ...]  # top-level properties that differ, as the engine reports them
    old: Mapping[str, Any] | None  # inputs before the step (secrets already masked)
    new: Mapping[str, Any] | None  # inputs after it


@dataclass(frozen=True)
class ObjectChange:
    kind: str
    name: str
    uid: str | None
    change: Change
    fields: tuple[str, ...]


@dataclass(frozen=True)
class ReplicaChange:
    external_key: str
    change: Change
    resource_id: str | None
    endpoint: str | None
    objects: tuple[ObjectChange, ...]


@dataclass(frozen=True)
class StackResult:
    operation: str  # preview | up | destroy
    stack: str
    namespace: str
    summary: Summary
    replicas: tuple[ReplicaChange, ...]
    drift: tuple[Drift, ...]

    def replica(self, external_key: str) -> ReplicaChange | None:
        return next((r for r in self.replicas if r.external_key == external_key), None)


def _state(meta: auto.events.StepEventStateMetadata | None) -> tuple[Mapping[str, Any], ...]:
    if meta is None:
        return ({}, {})
    return (meta.inputs or {}, meta.outputs or {})


def step_of(event: auto.EngineEvent) -> Step | None:
    """The step an event reports on one of our objects (None for anything else)."""
    source = event.resource_pre_event or event.res_outputs_event
    if source is None:
        return None
    meta = source.metadata
    if not meta.type.startswith("kubernetes:") or meta.type.startswith("pulumi:providers"):
        return None
    (old_in, old_out), (new_in, new_out) = _state(meta.old), _state(meta.new)
    metadata = (new_in or old_in).get("metadata") or {}
    key = (metadata.get("annotations") or {}).get(naming.ANNOTATION_EXTERNAL_KEY)
    if not isinstance(key, str):
        return None
    uid = ((new_out or old_out).get("metadata") or {}).get("uid")
    return Step(
        op=str(meta.op.value if isinstance(meta.op, auto.OpType) else meta.op),
        urn=meta.urn,
        kind=meta.type.rsplit(":", 1)[-1],
        name=str(metadata.get("name")),
        external_key=key,
        uid=uid if isinstance(uid, str) else None,
        fields=tuple(meta.diffs or ()),
        old=old_in or None,
        new=new_in or None,
    )


def steps_of(events: Iterable[auto.EngineEvent]) -> list[Step]:
    return [step for step in map(step_of, events) if step is not None]


def _object_changes(steps: Sequence[Step]) -> list[ObjectChange]:
    by_urn: dict[str, ObjectChange] = {}
    for step in steps:
        change = _OBJECT_CHANGES.get(step.op)
        if change is None:
            continue
        seen = by_urn.get(step.urn)
        if seen is None or _STRENGTH[change] > _STRENGTH[seen.change]:
            uid = step.uid or (seen.uid if seen else None)
            by_urn[step.urn] = ObjectChange(step.kind, step.name, uid, change, step.fields)
        elif step.uid and not seen.uid:  # outputs arrive after the step began
            by_urn[step.urn] = ObjectChange(
                seen.kind, seen.name, step.uid, seen.change, seen.fields
            )
    return list(by_urn.values())


def replica_change(objects: Sequence[ObjectChange]) -> Change:
    changes = {obj.change for obj in objects}
    if changes <= {"same"}:
        return "same"
    if len(changes) == 1:
        return next(iter(changes))
    return "replace" if "replace" in changes else "update"


def drift_of(steps: Sequence[Step]) -> list[Drift]:
    return [
        Drift(s.external_key, s.kind, s.name, fields=s.fields, gone=s.new is None)
        for s in steps
        if s.op == "refresh" and (s.new is None or s.fields)
    ]


def stack_result(
    operation: str, stack: str, config: StackConfig, events: Iterable[auto.EngineEvent]
) -> StackResult:
    """Per-key results of one run: stack keys in stack order, then keys it deleted."""
    steps = steps_of(events)
    by_key: dict[str, list[Step]] = {}
    for step in steps:
        by_key.setdefault(step.external_key, []).append(step)
    settings = config.kubernetes
    intents = {intent.external_key: intent for intent in config.replicas}
    replicas = []
    for key in [*intents, *sorted(by_key.keys() - intents.keys())]:
        objects = tuple(_object_changes(by_key.get(key, [])))
        intent = intents.get(key)
        replicas.append(
            ReplicaChange(
                external_key=key,
                change=replica_change(objects),
                resource_id=naming.resource_id(settings, key) if intent else None,
                endpoint=workloads.endpoint(settings, intent) if intent else None,
                objects=objects,
            )
        )
    return StackResult(
        operation=operation,
        stack=stack,
        namespace=settings.namespace,
        summary=Summary.of(r.change for r in replicas),
        replicas=tuple(replicas),
        drift=tuple(drift_of(steps)),
    )


def stack_changes(
    operation: str, project: str, stack: str, events: Iterable[auto.EngineEvent]
) -> StackChanges:
    """The engine's run in the reviewers' shape (``changes``): each object's change as the
    engine decided it, its diff over the inputs the engine compared, refresh drift apart."""
    steps = steps_of(events)
    by_key: dict[str, list[Step]] = {}
    for step in steps:
        if step.op != "refresh":
            by_key.setdefault(step.external_key, []).append(step)
    replicas = []
    for key, key_steps in by_key.items():
        by_urn: dict[str, list[Step]] = {}
        for step in key_steps:
            by_urn.setdefault(step.urn, []).append(step)
        diffs = [_object_diff(urn_steps) for urn_steps in by_urn.values()]
        objects = tuple(diff for diff in diffs if diff is not None)
        replicas.append(KeyChange(key, key_change(objects), objects))
    replicas.sort(key=lambda r: (SEVERITY[r.change], r.external_key))

    def inputs(change: str) -> dict[str, list[Mapping[str, Any]]]:
        found: dict[str, list[Mapping[str, Any]]] = {}
        for replica in (r for r in replicas if r.change == change):
            for step in by_key[replica.external_key]:
                if state := (step.old if change == "delete" else step.new):
                    found.setdefault(replica.external_key, []).append(state)
        return found

    return StackChanges(
        operation=operation,
        project=project,
        stack=stack,
        replicas=tuple(replicas),
        renames=tuple(find_renames(inputs("delete"), inputs("create"))),
        drift=tuple(drift_of(steps)),
    )


def _object_diff(steps: Sequence[Step]) -> ObjectDiff | None:
    """One object's change over all its steps (a replacement has several), with the diff of
    its inputs before the first step and after the last (None: no step changes anything)."""
    found = _object_changes(steps)
    if not found:
        return None
    [change] = found
    old = next((step.old for step in steps if step.old), None)
    new = next((step.new for step in reversed(steps) if step.new), None)
    diff = "" if change.change == "same" else yamldiff.diff_objects(old, new)
    return ObjectDiff(change.kind, change.name, change.change, diff)
