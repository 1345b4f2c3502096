"""What a run did (or would do), per external key, taken from the engine's events: a
``StackResult``, which is the one change type of ``review.changes`` (``StackChanges``).

The engine reports each step on a resource as a structured event: the operation, the resource's
type and URN, its old and new inputs and outputs, and the properties that differ. Our objects
carry their external key in an annotation, so every step maps to the key that owns it without
parsing any text. Each object's change and diff, and each key's change, are the one change model
of ``review.changes``: the engine decides an object's change, the key rule is the model's.
Steps of a refresh are kept apart as drift: what the cluster changed behind Pulumi's back, not
what this run proposes. Pure: events in, values out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi import automation as auto

from infercrane_pulumi.automation import policypack, targets
from infercrane_pulumi.cluster.actions import Doomed
from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.policy.rules import Finding
from infercrane_pulumi.program.records import Applied, AppliedObject
from infercrane_pulumi.review.changes import (
    Change,
    Drift,
    KeyChange,
    Left,
    ObjectChange,
    PolicyFinding,
    StackChanges,
    external_key,
    key_change,
    object_change,
    policy_findings,
)
from infercrane_pulumi.review.renames import find_renames

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


# What a run did (or would do): the one change type, as every driver names it.
StackResult = StackChanges
VERIFIED_NOTE = "Every key verified unchanged against the cluster: the engine did not run."


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


def _object(steps: Sequence[Step]) -> ObjectChange | None:
    """One object's change over all its steps (a replacement has several): the strongest step
    names the change, the diff spans its inputs before the first step and after the last, the
    fields are the engine's when it names them (None: no step changes anything)."""
    changes: list[Change] = [_OBJECT_CHANGES[s.op] for s in steps if s.op in _OBJECT_CHANGES]
    if not changes:
        return None
    old = next((step.old for step in steps if step.old), None)
    new = next((step.new for step in reversed(steps) if step.new), None)
    strongest = max(changes, key=_STRENGTH.__getitem__)
    found = object_change(old, new, change=strongest)
    engine_fields = next((step.fields for step in steps if step.fields), ())
    # The object that lives after the run: the last one a step created or kept, else the one
    # it deleted.
    uids = [s.uid for s in steps if s.uid and s.new] or [s.uid for s in steps if s.uid]
    uid = uids[-1] if uids else None
    return dataclasses.replace(found, fields=engine_fields or found.fields, uid=uid)


def _objects(steps: Iterable[Step]) -> tuple[ObjectChange, ...]:
    by_urn: dict[str, list[Step]] = {}
    for step in steps:
        by_urn.setdefault(step.urn, []).append(step)
    found = (_object(urn_steps) for urn_steps in by_urn.values())
    return tuple(obj for obj in found if obj is not None)


def drift_of(steps: Sequence[Step]) -> list[Drift]:
    return [
        Drift(s.external_key, s.kind, s.name, fields=s.fields, gone=s.new is None)
        for s in steps
        if s.op == "refresh" and (s.new is None or s.fields)
    ]


def stack_result(
    operation: str,
    stack: str,
    rendered: workloads.Rendered,
    events: Iterable[auto.EngineEvent],
    *,
    findings: Sequence[Finding] = (),
    kept: Mapping[str, Sequence[AppliedObject]] | None = None,
) -> StackResult:
    """Per-key results of one run of ``rendered``: stack keys in stack order, then keys it
    deleted. ``findings``: the stack's own policy findings, as the run judged them; ``kept``: the
    objects of keys the engine kept as applied whose steps were not read (carried keys), each
    ``same``."""
    steps = steps_of(events)
    known = kept or {}
    by_key: dict[str, list[Step]] = {}
    for step in steps:
        if step.op != "refresh":
            by_key.setdefault(step.external_key, []).append(step)
    config = rendered.config
    settings = config.kubernetes
    intents = {intent.external_key: intent for intent in config.replicas}
    replicas = []
    for key in [*intents, *sorted(by_key.keys() - intents.keys())]:
        unread = key not in by_key and key in known
        objects = _same(known[key]) if unread else _objects(by_key.get(key, []))
        intent = intents.get(key)
        replicas.append(
            KeyChange(
                external_key=key,
                change=key_change(obj.change for obj in objects),
                objects=objects,
                resource_id=naming.resource_id(settings, key) if intent else None,
                endpoint=rendered.endpoints.get(key),
            )
        )

    def inputs(change: Change) -> dict[str, list[Mapping[str, Any]]]:
        found: dict[str, list[Mapping[str, Any]]] = {}
        for replica in (r for r in replicas if r.change == change):
            for step in by_key[replica.external_key]:
                if state := (step.old if change == "delete" else step.new):
                    found.setdefault(replica.external_key, []).append(state)
        return found

    return StackResult(
        operation=operation,
        project=naming.PROJECT_NAME,
        stack=stack,
        namespace=settings.namespace,
        replicas=tuple(replicas),
        drift=tuple(drift_of(steps)),
        renames=tuple(find_renames(inputs("delete"), inputs("create"))),
        # The run path refuses a run with a mandatory finding: what is left is advisory. A
        # destroy leaves nothing to judge.
        policy=() if operation == "destroy" else _advisory(stack, config, findings, events),
    )


def _advisory(
    stack: str,
    config: StackConfig,
    findings: Sequence[Finding],
    events: Iterable[auto.EngineEvent],
) -> tuple[PolicyFinding, ...]:
    """The stack's own findings and its policy pack's, each once (the same settings find the
    same)."""
    owners = targets.owners(
        project=naming.PROJECT_NAME,
        stack=stack,
        settings=config.kubernetes,
        keys=(intent.external_key for intent in config.replicas),
    )
    reported = (event.policy_event for event in events if event.policy_event is not None)
    found = [*findings, *policypack.findings(reported, owners)]
    return policy_findings(tuple(dict.fromkeys(found)))


def _same(objects: Iterable[AppliedObject]) -> tuple[ObjectChange, ...]:
    return tuple(ObjectChange(o.kind, o.name, "same", uid=o.uid) for o in objects)


def unchanged(
    operation: str,
    stack: str,
    rendered: workloads.Rendered,
    applied: Applied,
    findings: Sequence[Finding] = (),
) -> StackResult:
    """A verified no-op of ``rendered`` (every key kept: ``cluster.verdict``): every key
    ``same``, its objects as applied."""
    config = rendered.config
    settings = config.kubernetes
    replicas = tuple(
        KeyChange(
            external_key=intent.external_key,
            change="same",
            objects=_same(applied.objects.get(intent.external_key, ())),
            resource_id=naming.resource_id(settings, intent.external_key),
            endpoint=rendered.endpoints[intent.external_key],
        )
        for intent in config.replicas
    )
    return StackResult(
        operation=operation,
        project=naming.PROJECT_NAME,
        stack=stack,
        namespace=settings.namespace,
        replicas=replicas,
        notes=(VERIFIED_NOTE,),
        verified_unchanged=True,
        policy=policy_findings(tuple(findings)),
    )


def completed(
    result: StackResult,
    deleted: Sequence[Doomed],
    reasons: Mapping[str, Sequence[str]],
    left: tuple[Left, ...],
) -> StackResult:
    """``result`` with what the run decided besides the engine (``automation.planning``): the
    objects it deleted itself (``with_deletions``), why it worked on each key
    (``with_reasons``) and what it left of ours."""
    return dataclasses.replace(with_reasons(with_deletions(result, deleted), reasons), left=left)


def with_reasons(result: StackResult, reasons: Mapping[str, Sequence[str]]) -> StackResult:
    """``result``, each key carrying why the run worked on it (``cluster.verdict``)."""
    replicas = tuple(
        dataclasses.replace(replica, reasons=tuple(reasons.get(replica.external_key, ())))
        for replica in result.replicas
    )
    return dataclasses.replace(result, replicas=replicas)


def with_deletions(result: StackResult, deleted: Sequence[Doomed]) -> StackResult:
    """``result`` and the keys whose objects the run deleted itself that the engine did not
    report, each ``delete``: a killed run's objects, which no state held."""
    reported = {replica.external_key for replica in result.replicas}
    found: dict[str, list[ObjectChange]] = {}
    for obj, uid in deleted:
        if (key := external_key(obj)) not in reported:
            change = ObjectChange(obj["kind"], obj["metadata"]["name"], "delete", uid=uid)
            found.setdefault(key, []).append(change)
    more = tuple(KeyChange(key, "delete", tuple(found[key])) for key in sorted(found))
    return dataclasses.replace(result, replicas=result.replicas + more)
