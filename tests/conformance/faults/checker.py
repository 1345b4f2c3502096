"""What must hold after a killed run and the next replica's run, read as admin and from the
stack's own state; every breach is named, none stops the reading of the others.

- The namespace holds exactly the desired objects (kind and name), beside the other stacks'
  objects placed there, and none of them is being deleted.
- Every object that must have outlived the faults (one the killed run found and kept, or made
  for a key still desired) is the very same object: its uid.
- Nothing of another stack, in this namespace or another, changed: uid, generation (a
  Service's resourceVersion), labels and annotations (the controllers' own left out).
- The next run reports as ``delete`` exactly the keys of this stack it found and did not want,
  those no state held (a killed run's) too.
- The stack records exactly the desired objects and no pending operation.
- The next run with the same intents is a verified no-op: every key ``same``, no engine run,
  no object of the namespace touched.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from infercrane_pulumi.cluster.api import Cluster, raise_for_status
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
from infercrane_pulumi.objects import kinds, naming, workloads
from tests.conformance.harness import replica
from tests.conformance.realnode import STANDIN_RESOURCES

OBJECT_KINDS = (kinds.DEPLOYMENT, kinds.SERVICE)
# The mark of the stack that applied an object (the contract, not the constant's name).
STACK_LABEL = "infercrane.dev/stack-hash"
# What controllers write on their own: never a sign that a run touched the object.
CONTROLLER_MARKS = ("deployment.kubernetes.io/",)

ObjectId = tuple[str, str]  # kind, name
Listing = dict[ObjectId, dict[str, Any]]  # every object's metadata


def intent(key: str, **extra: Any) -> dict[str, Any]:
    """A cheap intent: a GPU no node has (its Pod stays Pending), the stand-in's small sizes."""
    return replica(key, resources=STANDIN_RESOURCES, **extra)


def listed(admin: Cluster, namespace: str) -> Listing:
    """The metadata of every Deployment and Service of ``namespace``, whoever made them."""
    return {
        (kind.kind, name): meta
        for kind in OBJECT_KINDS
        for name, meta in admin.metadata(kind, namespace).items()
    }


def fingerprint(meta: Mapping[str, Any]) -> str:
    """What stays the same while nobody but the controllers touches an object."""

    def own(marks: Mapping[str, str] | None) -> dict[str, str]:
        return {k: v for k, v in (marks or {}).items() if not k.startswith(CONTROLLER_MARKS)}

    version = meta.get("generation") or meta.get("resourceVersion")
    marks = {"labels": own(meta.get("labels")), "annotations": own(meta.get("annotations"))}
    return f"{meta.get('uid')} {version} {json.dumps(marks, sort_keys=True)}"


def fingerprints(listing: Listing) -> dict[ObjectId, str]:
    return {obj: fingerprint(meta) for obj, meta in listing.items()}


def objects_of(keys: Iterable[str]) -> set[ObjectId]:
    return {(kind.kind, naming.object_name(key)) for key in keys for kind in OBJECT_KINDS}


def key_of(meta: Mapping[str, Any]) -> str | None:
    return (meta.get("annotations") or {}).get(naming.ANNOTATION_EXTERNAL_KEY)


def uids(listing: Listing, keys: Collection[str]) -> dict[ObjectId, str]:
    """The uid of each listed object of ``keys`` that is not being deleted."""
    return {
        obj: str(meta["uid"])
        for obj, meta in listing.items()
        if key_of(meta) in keys and not meta.get("deletionTimestamp")
    }


def other_stacks(admin: Cluster, settings: KubernetesSettings) -> dict[ObjectId, str]:
    """Place another stack's objects in the namespace, exactly ours in shape (managed-by, key
    hash, key annotation, name): one pair marked with another stack's identity, one pair
    unmarked (as an older release left them). No run of this stack may touch them."""
    placed = []
    marks: dict[str, dict[str, str]] = {
        "bystander-other-stack": {STACK_LABEL: naming.key_hash("infercrane/another-stack")},
        "bystander-unmarked": {},
    }
    for key, mark in marks.items():
        for obj in workloads.replica_objects(settings, ReplicaIntent.model_validate(intent(key))):
            obj["metadata"]["labels"] |= mark
            kind = workloads.KINDS[obj["kind"]]
            created = admin.transport.request("POST", kind.collection(settings.namespace), body=obj)
            raise_for_status(created, f"create {obj['kind']} {obj['metadata']['name']}")
            placed.append((obj["kind"], obj["metadata"]["name"]))
    found = fingerprints(listed(admin, settings.namespace))
    return {obj: found[obj] for obj in placed}


@dataclass(frozen=True)
class Expected:
    """What the namespace must hold after the next run."""

    keys: frozenset[str]  # the desired state
    same_objects: Mapping[ObjectId, str]  # objects that must still be these (uid)
    bystanders: Mapping[ObjectId, str]  # other stacks' objects here, their fingerprints
    elsewhere: Mapping[str, Mapping[ObjectId, str]] = field(default_factory=dict)
    deleted: frozenset[str] = frozenset()  # keys the next run must report deleted


def report_problems(answer: Mapping[str, Any], expected: Expected) -> list[str]:
    """The next run's ``apply`` answer: each key it deleted reported, and nothing else."""
    reported = {key for key, change in answer["changes"].items() if change == "delete"}
    if reported != expected.deleted:
        return [
            f"the next run reported {sorted(reported)} deleted; "
            f"it had to delete {sorted(expected.deleted)}"
        ]
    return []


def cluster_problems(admin: Cluster, namespace: str, expected: Expected) -> list[str]:
    live = listed(admin, namespace)
    problems = []
    wanted = objects_of(expected.keys) | expected.bystanders.keys()
    if missing := sorted(wanted - live.keys()):
        problems.append(f"missing: {missing}")
    for obj in sorted(live.keys() - wanted):
        meta = live[obj]
        problems.append(
            f"left behind: {obj[0]}/{obj[1]} (key {key_of(meta)!r}, "
            f"stack label {(meta.get('labels') or {}).get(STACK_LABEL)!r})"
        )
    if going := sorted(obj for obj in wanted & live.keys() if live[obj].get("deletionTimestamp")):
        problems.append(f"being deleted: {going}")
    replaced = [
        f"{obj[0]}/{obj[1]}"
        for obj, uid in sorted(expected.same_objects.items())
        if obj in live and live[obj]["uid"] != uid
    ]
    if replaced:
        problems.append(f"replaced although no replacement was due: {replaced}")
    touched = [
        obj
        for obj, was in sorted(expected.bystanders.items())
        if obj in live and fingerprint(live[obj]) != was
    ]
    if touched:
        problems.append(f"another stack's objects in this namespace changed: {touched}")
    for other, was in expected.elsewhere.items():
        now = fingerprints(listed(admin, other))
        if now != was:
            changed = sorted(obj for obj in was.keys() | now.keys() if was.get(obj) != now.get(obj))
            problems.append(f"namespace {other} changed: {changed}")
    return problems


def stack_problems(exported: Mapping[str, Any], keys: Collection[str]) -> list[str]:
    """The driver's ``export`` answer: no pending operation, exactly the desired objects."""
    if not exported.get("ok"):
        return [f"stack export failed: {exported.get('error')}"]
    problems = []
    if exported["pending"]:
        problems.append(f"pending operations in the state: {exported['pending']}")
    recorded = {(kind, name) for kind, name in exported["recorded"]}
    if recorded != objects_of(keys):
        problems.append(
            f"the state records {sorted(recorded)}, the desired objects are "
            f"{sorted(objects_of(keys))}"
        )
    return problems


def noop_problems(
    answer: Mapping[str, Any], keys: Collection[str], before: Listing, after: Listing
) -> list[str]:
    """The ``apply`` answer of a run with the same intents, and the namespace around it."""
    if not answer.get("ok"):
        return [f"the following run failed: {answer.get('error')}"]
    problems = []
    if answer["changes"] != dict.fromkeys(keys, "same"):
        problems.append(f"the following run changed {answer['changes']}")
    if not answer["verified"]:
        problems.append("the following run started the engine (not a verified no-op)")
    if fingerprints(before) != fingerprints(after):
        problems.append("the following run touched the namespace")
    return problems
