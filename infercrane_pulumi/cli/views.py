"""How results look: plain JSON values (camelCase keys), tables, the versioned envelope.

Handlers of the command line return a ``Result``; ``emit``/``emit_error`` are the one renderer
(a table, YAML or Markdown text, or with ``--json`` the envelope), writing to the stream they
are given. The JSON shapes are the ones ``schemas/`` describes, so a control plane in any
language can rely on them; a stack's change has one (``stack_changes``), whatever command made
it. Progress lines carry the engine's diagnostics sanitized as the run's errors
are (``failures.sanitized``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from pydantic.alias_generators import to_camel

from infercrane_pulumi.automation.failures import sanitized
from infercrane_pulumi.automation.results import EngineEvent, StackResult, step_of
from infercrane_pulumi.cluster.doctor import DoctorRow
from infercrane_pulumi.cluster.observe import ReplicaObservation, conditions_summary
from infercrane_pulumi.errors import InferCraneError
from infercrane_pulumi.review.changes import PolicyFinding, StackChanges

ENVELOPE_VERSION = "infercrane.dev/cli/v2"
DIFF_VERSION = "infercrane.dev/diff/v2"
PROGRESS_VERSION = "infercrane.dev/progress/v1"
Table = tuple[list[str], list[list[str]]]


@dataclass
class Result:
    """What a command produced: JSON ``data`` and, for people, a table or a text."""

    command: str
    ok: bool
    data: Any = None
    text: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    footer: str = ""  # one line under the table
    exit_code: int | None = None  # None: ``ok`` decides (``diff --policy-gate`` sets its own)


def envelope(result: Result) -> dict[str, Any]:
    """``result`` as ``--json`` prints it (``schemas/envelope.schema.json``)."""
    head = {"apiVersion": ENVELOPE_VERSION, "command": result.command, "ok": result.ok}
    return head | {"result": result.data}


def error_envelope(error: InferCraneError, *, command: str) -> dict[str, Any]:
    """``error`` of ``command`` as ``--json`` prints it."""
    head = {"apiVersion": ENVELOPE_VERSION, "command": command, "ok": False}
    return head | {"error": error.to_record()}


def _finding_json(found: PolicyFinding) -> dict[str, Any]:
    return found.finding.to_record() | {"status": found.status}


def stack_changes(changes: StackChanges) -> dict[str, Any]:
    """A stack's change as its one JSON value (``schemas/diff.schema.json``, ``stackChanges``):
    the command line's result of ``diff``, ``preview``, ``up``, ``remove`` and ``destroy``, the
    runner's status object, and the pull-request workflow's JSON for tools."""
    summary = changes.summary
    return {
        "apiVersion": DIFF_VERSION,
        "operation": changes.operation,
        "project": changes.project,
        "stack": changes.stack,
        "namespace": changes.namespace,
        "summary": {
            "add": summary.add,
            "change": summary.change,
            "destroy": summary.destroy,
            "same": summary.same,
            "changes": summary.changes,
        },
        "replicas": [
            {
                "externalKey": replica.external_key,
                "change": replica.change,
                "resourceId": replica.resource_id,
                "endpoint": replica.endpoint,
                "objects": [
                    {
                        "kind": o.kind,
                        "name": o.name,
                        "uid": o.uid,
                        "change": o.change,
                        "fields": list(o.fields),
                        "diff": o.diff,
                    }
                    for o in replica.objects
                ],
                "policy": [_finding_json(f) for f in changes.findings_of(replica.external_key)],
                "reasons": list(replica.reasons),
            }
            for replica in changes.replicas
        ],
        "renames": [{"oldKey": r.old_key, "newKey": r.new_key} for r in changes.renames],
        "drift": [
            {
                "externalKey": d.external_key,
                "kind": d.kind,
                "name": d.name,
                "fields": list(d.fields),
                "gone": d.gone,
            }
            for d in changes.drift
        ],
        "left": [
            {"externalKey": o.external_key, "kind": o.kind, "name": o.name, "reason": o.reason}
            for o in changes.left
        ],
        "notes": list(changes.notes),
        "verifiedUnchanged": changes.verified_unchanged,
        "policy": [_finding_json(f) for f in changes.findings_of(None)],
        "desiredVersion": None if changes.desired is None else changes.desired.record(),
    }


def emit(result: Result, *, as_json: bool, out: TextIO) -> None:
    if as_json:
        out.write(json.dumps(envelope(result), sort_keys=True) + "\n")
    elif result.header:
        out.write(_table(result.header, result.rows) + "\n")
        if result.footer:
            out.write(result.footer + "\n")
    else:
        out.write(result.text)


def emit_error(error: InferCraneError, *, command: str, as_json: bool, out: TextIO) -> None:
    """The envelope on ``out`` with ``--json``, else one line per problem."""
    if as_json:
        out.write(json.dumps(error_envelope(error, command=command), sort_keys=True) + "\n")
    else:
        out.write("".join(f"{command}: {problem}\n" for problem in error.problems))


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def to_json(value: Any) -> Any:
    """Dataclasses, mappings and sequences as JSON values, field names in camelCase."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {to_camel(f.name): to_json(vars(value)[f.name]) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [to_json(v) for v in value]
    return value


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
    left: dict[str, list[str]] = {}
    for obj in result.left:
        left.setdefault(obj.external_key, []).append(f"{obj.kind}/{obj.name}")
    rows += [[key, "left", ", ".join(objects), "-"] for key, objects in left.items()]
    return ["KEY", "CHANGE", "OBJECTS", "ENDPOINT"], rows


def summary_line(result: StackResult) -> str:
    s = result.summary
    verified = " (verified against the cluster; the engine did not run)"
    keys = len({obj.external_key for obj in result.left})
    left = f"; {keys} key(s) left, not named by this run: the next ensure decides" * bool(keys)
    return (
        f"{result.operation} {result.stack}: {s.add} to add, {s.change} to change, "
        f"{s.destroy} to destroy, {s.same} unchanged" + verified * result.verified_unchanged + left
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
        # Like the run's errors: no raw client output, no credentials in a URL.
        lines = diagnostic.message.strip().splitlines()
        return record | {
            "type": "diagnostic",
            "severity": diagnostic.severity,
            "message": "\n".join(sanitized(line.rstrip()) for line in lines),
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
