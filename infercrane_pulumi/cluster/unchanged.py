"""Which keys would a run leave as they are? Those the engine need not touch.

A run leaves a key as it is when its intent is the one the stack last applied and every object
of it is still the very object that run left: the same uid and generation (nobody replaced it
or changed its spec), carrying our ownership marks, the desired intent hash and every label
and annotation we set, with no field manager the preflight would refuse. The stack
records each object's uid and generation in its outputs at every apply (``components``). Any
doubt (an older stack without that record, a missing object, drift, a foreign manager) says
why, and that key takes the engine's path, where the preflight and the engine decide as ever.
A run whose keys are all verified is a no-op. Pure: values in, reasons out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infercrane_pulumi import naming, workloads
from infercrane_pulumi.cluster.client import object_subject
from infercrane_pulumi.cluster.preflight import TAKEOVER_MANAGERS, Snapshot
from infercrane_pulumi.config_rules import parse_stack_config
from infercrane_pulumi.intents import KubernetesSettings, PolicySettings, ReplicaIntent, StackConfig
from infercrane_pulumi.manifests import Manifest


@dataclass(frozen=True)
class AppliedObject:
    """One object as the stack's last successful apply left it."""

    kind: str
    name: str
    uid: str | None
    generation: int | None


@dataclass(frozen=True)
class Applied:
    """What the stack's outputs say it applied last: each key's intent and objects, and the
    settings it applied them with (all but the kubeconfig: ``naming.settings_record``; None in
    outputs written before they were recorded)."""

    intents: tuple[ReplicaIntent, ...] = ()
    objects: Mapping[str, tuple[AppliedObject, ...]] = field(default_factory=dict)
    settings: KubernetesSettings | None = None
    # Each key's record in the outputs, exactly as the program wrote it: what a run that
    # leaves a verified key out of the program exports for it (``carried``).
    records: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def config(self, given: KubernetesSettings) -> StackConfig:
        """What the stack applied, as a configuration (validated as a whole): its intents
        under its recorded settings, which hold no kubeconfig, so ``given``'s is used (the
        credentials of whoever reads the cluster). Outputs that predate the record: under
        ``given``, which a caller that must not apply pending edits proves first
        (``verified_keys``). Under no policy (``PolicySettings.judging_nothing``)."""
        settings = given if self.settings is None else self.settings
        document = naming.settings_record(settings)
        if given.kubeconfig is not None:
            document["kubeconfig"] = given.kubeconfig
        return parse_stack_config(
            document,
            [intent.model_dump(mode="json", by_alias=True) for intent in self.intents],
            PolicySettings.judging_nothing().model_dump(mode="json", by_alias=True),
        )


def verified_keys(
    desired: StackConfig, applied: Applied, live: Snapshot, *, stack: str | None = None
) -> frozenset[str]:
    """The keys of ``desired`` the stack applied as they are and whose objects are all still
    the very objects that apply left: a run need not touch them. ``stack``: the identity the
    objects must carry (an object applied before objects carried one is re-applied once)."""
    intents = {intent.external_key: intent for intent in applied.intents}
    same = [i for i in desired.replicas if intents.get(i.external_key) == i]
    kept = desired.model_copy(update={"replicas": tuple(same)})
    found = differences(kept, applied, live, stack=stack)
    return frozenset(k for k, why in found.items() if not why)


def differences(
    desired: StackConfig, applied: Applied, live: Snapshot, *, stack: str | None = None
) -> dict[str, list[str]]:
    """Per key of ``desired``: why its objects may not be what the stack's last apply left
    (empty: they are)."""
    reasons: dict[str, list[str]] = {i.external_key: [] for i in desired.replicas}
    for obj in workloads.stack_objects(desired, stack=stack):
        key = obj["metadata"]["annotations"][naming.ANNOTATION_EXTERNAL_KEY]
        record = {(o.kind, o.name): o for o in applied.objects.get(key, ())}
        found = record.get((obj["kind"], obj["metadata"]["name"]))
        reasons[key] += _differences(obj, found, live)
    return reasons


def _differences(desired: Manifest, record: AppliedObject | None, live: Snapshot) -> list[str]:
    what = object_subject(desired)
    if record is None or record.uid is None:
        return [f"{what}: no record of its last apply"]
    meta = live[desired["kind"]].get(desired["metadata"]["name"])
    if meta is None:
        return [f"{what}: gone"]
    if (meta.get("uid"), meta.get("generation")) != (record.uid, record.generation):
        return [f"{what}: not the object, or not the spec, the last apply left"]
    wanted = desired["metadata"]
    for marks in ("labels", "annotations"):
        have = meta.get(marks) or {}
        if any(have.get(k) != v for k, v in wanted[marks].items()):
            return [f"{what}: its {marks} differ from ours"]
    managers = _managers(meta.get("managedFields") or [])
    if (naming.FIELD_MANAGER, "Apply") not in managers or managers & TAKEOVER_MANAGERS:
        return [f"{what}: its field managers changed"]
    return []


def _managers(entries: Sequence[Mapping[str, Any]]) -> set[tuple[Any, Any]]:
    return {(e.get("manager"), e.get("operation")) for e in entries}
