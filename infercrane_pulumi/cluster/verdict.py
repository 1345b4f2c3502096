"""One verdict per object of a run, decided once over one metadata snapshot of the namespace.

Every object a run might touch is judged here, and only here: each one the run would apply (as
its key's workload API builds it) and every live object of the stack, whichever API made it:

- ``keep``: the very object the stack's last apply left (same uid and generation, our marks
  and the desired intent hash, no other field manager the rule would refuse), its key's intent
  unchanged; a key whose objects are all kept need not go to the engine;
- ``apply``: desired, and absent or not as the last apply left it (the reasons say why);
- ``refuse``: at a desired name, or at a name of a key the stack removes, but not exactly
  ours (or carrying fields a manager holds that pulumi-kubernetes would take over);
- ``delete``: exactly ours, of this stack (its identity, or applied before objects carried one
  under a key the stack's record removes), not desired, and of a key the caller named: a
  removed key's, a killed run's, or one of a workload API the stack no longer uses. Deleted by
  the uid read here;
- ``leave``: as ``delete``, but of a key the caller did not name (a ``remove`` names one key,
  and a killed run's objects of other keys are not its to delete): left as it is, reported,
  for the next run that names the whole desired set.

The deletion rule, once: an object is deleted only when its caller named it. An ``up`` (an
``ensure``, a person's ``pulumi up`` of a stack file) names the whole desired set, so every
exactly-ours object of the stack outside it goes; a ``destroy`` names the whole stack; a
``remove`` names its key alone (``judge``'s ``named``). An ``up`` that desires nothing while it
would delete replicas empties the namespace: only on purpose (``allowEmpty``), so that a
desired set that went missing is never a take-down (``Verdict.emptying``). The preflight
(``ownership``), the verified no-op and targets (``automation.planning``), the refresh decision
and the deletions all read this verdict (``actions``); none decides again. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercrane_pulumi.cluster.actions import ObjectVerdict, Verdict
from infercrane_pulumi.cluster.api import object_subject, subject
from infercrane_pulumi.cluster.preflight import Snapshot
from infercrane_pulumi.config.intents import ALLOW_EMPTY_KEY, REPLICAS_KEY, StackConfig
from infercrane_pulumi.objects import naming, workloads
from infercrane_pulumi.objects.manifests import Manifest
from infercrane_pulumi.objects.workloadapi import WorkloadApi
from infercrane_pulumi.objects.workloads import KINDS
from infercrane_pulumi.program.records import Applied, AppliedObject

# pulumi-kubernetes silently renames these managers to its own on every real update
# (fixCSAFieldManagers in v4.25), taking over fields somebody else set: we refuse instead.
TAKEOVER_MANAGERS = frozenset(
    {
        ("kubectl", "Apply"),
        ("kubectl", "Update"),
        ("before-first-apply", "Update"),
        ("pulumi-kubernetes", "Update"),
        ("pulumi-kubernetes.exe", "Update"),
        ("pulumi-resource-kubernetes", "Update"),
    }
)


def owner_key(metadata: Mapping[str, Any], namespace: str) -> str | None:
    """The external key of an exactly-ours object, or None when any ownership mark is off: the
    one definition of "ours" that the verdict, inspect and doctor share."""
    object_labels = metadata.get("labels") or {}
    key = (metadata.get("annotations") or {}).get(naming.ANNOTATION_EXTERNAL_KEY)
    if (
        metadata.get("namespace") != namespace
        or object_labels.get(naming.LABEL_MANAGED_BY) != naming.MANAGED_BY
        or not isinstance(key, str)
        or object_labels.get(naming.LABEL_KEY_HASH) != naming.key_hash(key)
        or metadata.get("name") != naming.object_name(key)
    ):
        return None
    return key


def is_exactly_ours(metadata: Mapping[str, Any], namespace: str, external_key: str) -> bool:
    return owner_key(metadata, namespace) == external_key


def ownership_problems(desired: Manifest, live: Mapping[str, Any] | None) -> list[str]:
    """Why an existing object at a desired name must not be applied to (empty: safe)."""
    if live is None:
        return []
    what = object_subject(desired)
    meta = live.get("metadata") or {}
    foreign = foreign_problems(desired, meta)
    if foreign:
        return foreign
    entries = meta.get("managedFields") or []
    if not entries:
        return [f"{what}: has no managedFields, so the provider would force its apply; refusing"]
    return [
        f"{what}: fields {', '.join(field_paths(entry.get('fieldsV1') or {})) or '(none)'} "
        f"managed by {entry.get('manager')!r} ({entry.get('operation')}) would be silently "
        "taken over by pulumi-kubernetes; have that manager release them first"
        for entry in entries
        if (entry.get("manager"), entry.get("operation")) in TAKEOVER_MANAGERS
    ]


def foreign_problems(desired: Manifest, meta: Mapping[str, Any]) -> list[str]:
    """Why the live object at a desired name is not exactly ours (empty: it is): its marks
    must name our key, and when both carry a stack identity, the same stack."""
    key = desired["metadata"]["annotations"][naming.ANNOTATION_EXTERNAL_KEY]
    if not is_exactly_ours(meta, desired["metadata"]["namespace"], key):
        return [
            f"{object_subject(desired)}: exists but is not exactly ours (managed-by, key-hash "
            "label and key annotation must all match); InferCrane never adopts, changes or "
            "deletes it"
        ]
    ours = desired["metadata"]["labels"].get(naming.LABEL_STACK)
    theirs = (meta.get("labels") or {}).get(naming.LABEL_STACK)
    if ours is not None and theirs is not None and ours != theirs:
        return [
            f"{object_subject(desired)}: belongs to another stack (stack-hash {theirs}); "
            "InferCrane never adopts, changes or deletes another stack's object"
        ]
    return []


def field_paths(fields: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Leaf paths of a managedFields ``fieldsV1`` set, like ``.spec.replicas``."""
    paths: list[str] = []
    for key, sub in fields.items():
        if key == ".":
            continue
        step = f"{prefix}.{key[2:]}" if key.startswith("f:") else f"{prefix}[{key[2:]}]"
        paths += field_paths(sub, step) if sub else [step]
    return paths


def judge(
    desired: workloads.Rendered,
    live: Snapshot,
    *,
    applied: Applied | None = None,
    keep: bool = True,
    named: frozenset[str] | None = None,
) -> Verdict:
    """The verdict of a run of ``desired`` (its objects, marked with the stack's identity, or
    None: objects applied before they carried one) over ``live``. ``applied``: what the stack
    recorded of its last apply (None: nothing known, as for a person's ``pulumi up``);
    ``keep``: whether an object may be kept (not when another operation may hold the stack, a
    refresh is asked for, or a policy pack must judge every object); ``named``: the keys whose
    undesired objects the caller asked to delete (None: every key, as an ``up`` of the whole
    desired set and a ``destroy`` ask)."""
    record = applied or Applied()
    stack = desired.stack
    settings = desired.config.kubernetes
    intents = {intent.external_key: intent for intent in desired.config.replicas}
    recorded = {intent.external_key: intent for intent in record.intents}
    unchanged = {key for key, intent in intents.items() if keep and recorded.get(key) == intent}
    objects = _whole_keys([_desired(obj, live, record, unchanged) for obj in desired.all()])
    removed = [key for key in recorded if key not in intents]
    # At their names as the stack applied them: of the kinds of the workload API it used.
    used = workloads.workload_api(record.settings or settings)
    objects += _look_alikes(removed, used, live, namespace=settings.namespace, stack=stack)
    wanted = {(o.manifest["kind"], o.manifest["metadata"]["name"]) for o in objects}
    objects += _leftovers(
        live,
        namespace=settings.namespace,
        stack=stack,
        wanted=wanted,
        removed=set(removed),
        named=named,
    )
    objects += _unlisted(record, live, settings.namespace)
    return Verdict(
        tuple(objects),
        drift=tuple(_drift(desired.config, record, live)),
        emptying=_emptying(desired.config, objects, named),
    )


def _emptying(
    config: StackConfig, objects: list[ObjectVerdict], named: frozenset[str] | None
) -> tuple[str, ...]:
    """An up of the whole desired set (not a ``remove`` of named keys) that desires no
    replica and would delete some, without ``allowEmpty``. A destroy empties on purpose."""
    deleted = sorted({o.key for o in objects if o.action == "delete"})
    if config.replicas or config.allow_empty or named is not None or not deleted:
        return ()
    shown = ", ".join(deleted[:3]) + (f" and {len(deleted) - 3} more" if len(deleted) > 3 else "")
    return (
        f"{REPLICAS_KEY}: empty, so this run would delete every replica of the stack ({shown}); "
        f"set {ALLOW_EMPTY_KEY}: true to empty the namespace on purpose, or run destroy",
    )


def _desired(obj: Manifest, live: Snapshot, record: Applied, unchanged: set[str]) -> ObjectVerdict:
    """``unchanged``: the keys whose intent is the one the stack applied (and may be kept)."""
    key = obj["metadata"]["annotations"][naming.ANNOTATION_EXTERNAL_KEY]
    meta = live.get(obj["kind"], {}).get(obj["metadata"]["name"])
    problems = ownership_problems(obj, None if meta is None else {"metadata": meta})
    uid = None if meta is None else meta.get("uid")
    if problems:
        return ObjectVerdict("refuse", obj, key, uid, tuple(problems))
    kept = {(o.kind, o.name): o for o in record.objects.get(key, ())}
    differences = _differences(obj, kept.get((obj["kind"], obj["metadata"]["name"])), meta)
    if key in unchanged and not differences:
        return ObjectVerdict("keep", obj, key, uid)
    return ObjectVerdict("apply", obj, key, uid, tuple(differences or ["its intent changed"]))


def _whole_keys(objects: list[ObjectVerdict]) -> list[ObjectVerdict]:
    """A key goes to the engine whole: its kept objects are applied when another is."""
    worked = {o.key for o in objects if o.action != "keep"}
    return [
        ObjectVerdict(
            "apply",
            o.manifest,
            o.key,
            o.uid,
            ("its key goes to the engine for another of its objects",),
        )
        if o.action == "keep" and o.key in worked
        else o
        for o in objects
    ]


def _differences(
    desired: Manifest, record: AppliedObject | None, meta: Mapping[str, Any] | None
) -> list[str]:
    """Why the live object may not be the one the stack's last apply left (empty: it is)."""
    if meta is None:
        return ["absent"]
    if record is None or record.uid is None:
        return ["no record of its last apply"]
    if (meta.get("uid"), meta.get("generation")) != (record.uid, record.generation):
        return ["not the object, or not the spec, the last apply left"]
    wanted = desired["metadata"]
    for marks in ("labels", "annotations"):
        have = meta.get(marks) or {}
        if any(have.get(k) != v for k, v in wanted[marks].items()):
            return [f"its {marks} differ from ours"]
    # A manager the rule refuses was refused before (``ownership_problems``): ours must be one.
    managers = {(e.get("manager"), e.get("operation")) for e in meta.get("managedFields") or []}
    if (naming.FIELD_MANAGER, "Apply") not in managers:
        return ["its field managers changed"]
    return []


def _look_alikes(
    removed: list[str],
    api: WorkloadApi,
    live: Snapshot,
    *,
    namespace: str,
    stack: str | None,
) -> list[ObjectVerdict]:
    """The objects at the names of the keys the stack removes that are not exactly ours: a
    look-alike put in place of ours is refused, never deleted."""
    found = []
    for key in removed:
        for kind in api.kinds:
            name = naming.object_name(key)
            meta = live.get(kind.kind, {}).get(name)
            # What the key's object carries that ``foreign_problems`` reads: its marks.
            ours: Manifest = {
                "kind": kind.kind,
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {} if stack is None else {naming.LABEL_STACK: stack},
                    "annotations": {naming.ANNOTATION_EXTERNAL_KEY: key},
                },
            }
            problems = [] if meta is None else foreign_problems(ours, meta)
            if meta is not None and problems:
                found.append(ObjectVerdict("refuse", ours, key, meta.get("uid"), tuple(problems)))
    return found


def _leftovers(
    live: Snapshot,
    *,
    namespace: str,
    stack: str | None,
    wanted: set[tuple[str, str]],
    removed: set[str],
    named: frozenset[str] | None,
) -> list[ObjectVerdict]:
    found = []
    for kind, objects in sorted(live.items()):
        for name, meta in sorted(objects.items()):
            key = owner_key(meta, namespace)
            if key is None or (kind, name) in wanted:
                continue
            marked = (meta.get("labels") or {}).get(naming.LABEL_STACK)
            if (stack is not None and marked == stack) or (marked is None and key in removed):
                # The key rides along so that a run can report what it deleted.
                obj: Manifest = {
                    "apiVersion": KINDS[kind].group_version,
                    "kind": kind,
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "annotations": {naming.ANNOTATION_EXTERNAL_KEY: key},
                    },
                }
                if named is not None and key not in named:
                    why = (
                        f"key {key} is not desired by the stack's record, nor named by this "
                        "run (a stopped run's object?): left for the next ensure to decide"
                    )
                    found.append(ObjectVerdict("leave", obj, key, str(meta.get("uid")), (why,)))
                    continue
                why = "this stack's, and no desired key's" if marked else "a removed key's"
                found.append(ObjectVerdict("delete", obj, key, str(meta.get("uid")), (why,)))
    return found


def _unlisted(record: Applied, live: Snapshot, namespace: str) -> list[ObjectVerdict]:
    """A kind the stack applied last that this identity could not list: its objects could be
    neither kept nor deleted, so the run is refused (switching the workload API needs both
    APIs' Roles until the run that switches has deleted the old objects)."""
    if record.settings is None:
        return []
    found = []
    for kind in workloads.workload_api(record.settings).kinds:
        if kind.kind not in live:
            why = (
                f"namespace {namespace}: the stack applied {kind.kind} objects (workloadApi "
                f"{record.settings.workload_api}) that this identity may not list "
                f"({kind.resource}); bind that workload API's Role until a run has deleted them"
            )
            obj: Manifest = {"kind": kind.kind, "metadata": {"name": "*", "namespace": namespace}}
            found.append(ObjectVerdict("refuse", obj, "", None, (why,)))
    return found


def _drift(desired: StackConfig, record: Applied, live: Snapshot) -> list[str]:
    """What a refresh would find among the objects of the keys the stack applied: one gone,
    or one that no longer carries the intent that was applied to it."""
    namespace = desired.kubernetes.namespace  # where ``live`` was read
    # Each intent as it was applied: with the settings it was applied with (an older record
    # holds none: the desired ones).
    applied_with = record.settings or desired.kubernetes
    found = []
    for intent in record.intents:
        applied_hash = naming.intent_hash(applied_with, intent)
        name = naming.object_name(intent.external_key)
        for kind in workloads.workload_api(applied_with).kinds:
            meta = live.get(kind.kind, {}).get(name)
            what = subject(kind.kind, namespace, name)
            if meta is None:
                found.append(f"{what}: gone")
            elif not naming.carries(meta, applied_hash):
                found.append(f"{what}: carries another intent than the one applied")
    return found
