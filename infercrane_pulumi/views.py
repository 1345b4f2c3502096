"""How results look: plain JSON values (camelCase keys) and table rows. Pure; never prints.

The CLI prints what these return; the JSON shapes are the ones ``schemas/`` describes, so a
control plane in any language can rely on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic.alias_generators import to_camel

from infercrane_pulumi.automation.results import EngineEvent, StackResult, step_of
from infercrane_pulumi.cluster.doctor import DoctorRow
from infercrane_pulumi.cluster.observe import ReplicaObservation, conditions_summary

PROGRESS_VERSION = "infercrane.dev/progress/v1"
Table = tuple[list[str], list[list[str]]]


def to_json(value: Any) -> Any:
    """Dataclasses, mappings and sequences as JSON values, field names in camelCase."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            to_camel(f.name): to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
        }
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [to_json(v) for v in value]
    return value


def stack_result_json(result: StackResult) -> dict[str, Any]:
    document: dict[str, Any] = to_json(result)
    document["summary"]["changes"] = result.summary.changes
    return document


def stack_result_table(result: StackResult) -> Table:
    rows = [
        [
            replica.external_key,
            replica.change,
            ", ".join(f"{o.kind}/{o.name}:{o.change}" for o in replica.objects) or "-",
            replica.endpoint or "-",
        ]
        for replica in result.replicas
    ]
    return ["KEY", "CHANGE", "OBJECTS", "ENDPOINT"], rows


def summary_line(result: StackResult) -> str:
    s = result.summary
    return (
        f"{result.operation} {result.stack}: {s.add} to add, {s.change} to change, "
        f"{s.destroy} to destroy, {s.same} unchanged"
    )


def observation_table(observations: Sequence[ReplicaObservation]) -> Table:
    rows = [
        [
            entry.external_key,
            entry.state,
            f"{obj.kind}/{obj.name}" if obj else "-",
            conditions_summary(obj) if obj else "-",
            entry.reason or "-",
        ]
        for entry in observations
        for obj in entry.objects or [None]
    ]
    return ["KEY", "STATE", "OBJECT", "CONDITIONS", "REASON"], rows


def doctor_table(rows: Sequence[DoctorRow]) -> Table:
    return ["STATUS", "NAME", "MESSAGE"], [[r.status.upper(), r.name, r.message] for r in rows]


def progress_record(event: EngineEvent) -> dict[str, Any] | None:
    """One engine event as a progress line (None for events a caller has no use for)."""
    record: dict[str, Any] = {"apiVersion": PROGRESS_VERSION, "sequence": event.sequence}
    if event.diagnostic_event is not None:
        diagnostic = event.diagnostic_event
        return record | {
            "type": "diagnostic",
            "severity": diagnostic.severity,
            "message": diagnostic.message.strip(),
        }
    if event.summary_event is not None:
        changes = event.summary_event.resource_changes or {}
        return record | {
            "type": "summary",
            "resourceChanges": {str(getattr(k, "value", k)): v for k, v in changes.items()},
        }
    source = event.resource_pre_event or event.res_outputs_event
    if source is None:
        return None
    step = step_of(event)
    op = source.metadata.op
    record |= {
        "type": "step" if event.resource_pre_event is not None else "done",
        "op": str(getattr(op, "value", op)),
        "urn": source.metadata.urn,
    }
    if step is not None:
        record |= {"externalKey": step.external_key, "kind": step.kind, "name": step.name}
    return record
