"""What a change does to one stack, per external key: the one change model of the project.

Every output that says what changes reads it, as one type (``StackChanges``) with one JSON
rendering (``cli.views.stack_changes``): the per-key results of ``preview``/``up``/``remove``/
``destroy`` (``automation.results``, from the engine's events, where it is named
``StackResult``), the JSON command line, the offline diff (objects rendered at a base ref and
at head, no cluster) and both pull-request comments. Pure: objects in, values out.

Object rule. An object is *replaced* (deleted, then created) when a field that Kubernetes
refuses to change in place differs: for every kind ``apiVersion``, ``kind``, ``metadata.name``
and ``metadata.namespace`` (a different object altogether), plus each kind's own immutable
fields (``kinds.Kind.immutable``: a Deployment's ``spec.selector``, a Service's
``spec.clusterIP``/``spec.clusterIPs``). Any other difference is an in-place *update*.

Key rule (``key_change``), over the changes of the key's objects:
- ``same``: every object is unchanged (or the key has none);
- ``create``: every object is created (the key is new);
- ``delete``: every object is deleted (the key is gone);
- ``replace``: an object is replaced, or the key both loses and gains objects (a workload-API
  switch swaps the object that serves);
- ``update``: anything else, e.g. one object changed in place, or one object of an existing
  key created again after it was deleted out of band while the others stay.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.workloads import KINDS
from infercrane_pulumi.policy.rules import Finding
from infercrane_pulumi.program.records import DesiredVersion
from infercrane_pulumi.review import yamldiff
from infercrane_pulumi.review.renames import Rename, find_renames

Change = Literal["create", "update", "replace", "delete", "same"]
# A policy finding against the base of a diff: it appears, stays or goes; None in a run.
FindingStatus = Literal["new", "kept", "fixed"]
Manifest = Mapping[str, Any]

# Differ, and it is another object altogether, whatever its kind.
IDENTITY_FIELDS: tuple[tuple[str, ...], ...] = (
    ("apiVersion",),
    ("kind",),
    ("metadata", "name"),
    ("metadata", "namespace"),
)
# Most consequential first: that is the order reviewers read, and the order a size cut keeps.
SEVERITY: Mapping[Change, int] = {"delete": 0, "replace": 1, "update": 2, "create": 3, "same": 4}


@dataclass(frozen=True)
class ObjectChange:
    kind: str
    name: str
    change: Change
    fields: tuple[str, ...] = ()  # top-level fields that differ
    diff: str = ""  # unified YAML of the changed fields only (``yamldiff``)
    uid: str | None = None  # the live object's, when a run touched the cluster


@dataclass(frozen=True)
class KeyChange:
    external_key: str
    change: Change
    objects: tuple[ObjectChange, ...]
    # What the control plane routes on; a run fills them for the keys it keeps.
    resource_id: str | None = None
    endpoint: str | None = None
    # Why the run worked on the key: each object its verdict did not keep, and why
    # (``cluster.verdict``); none for a key verified unchanged, and in a diff.
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Drift:
    """Found by a refresh: the cluster differs from Pulumi's state (not proposed by the change)."""

    external_key: str
    kind: str
    name: str
    fields: tuple[str, ...]
    gone: bool  # deleted out of band


@dataclass(frozen=True)
class Left:
    """An object of ours a run left as it is, because its caller did not name its key (a
    ``remove`` names one key): the next run of the whole desired set decides it."""

    external_key: str
    kind: str
    name: str
    reason: str


@dataclass(frozen=True)
class PolicyFinding:
    """What the stack's policy says of the change (``policy.rules``), and, in a diff, whether
    the change brings the finding, keeps it or fixes it."""

    finding: Finding
    status: FindingStatus | None = None


def policy_findings(
    after: Sequence[Finding], before: Sequence[Finding] | None = None
) -> tuple[PolicyFinding, ...]:
    """The findings of a change's result; given ``before`` (a diff's base), each marked new or
    kept, then the base's findings the change fixes."""
    if before is None:
        return tuple(PolicyFinding(f) for f in after)
    return (
        *(PolicyFinding(f, "kept" if f in before else "new") for f in after),
        *(PolicyFinding(f, "fixed") for f in before if f not in after),
    )


@dataclass(frozen=True)
class Summary:
    """Counts of external keys (not objects) by what happens to them."""

    add: int
    change: int
    destroy: int
    same: int

    @classmethod
    def of(cls, changes: Iterable[Change]) -> Summary:
        counted = list(changes)
        return cls(
            add=counted.count("create"),
            change=counted.count("update") + counted.count("replace"),
            destroy=counted.count("delete"),
            same=counted.count("same"),
        )

    @property
    def changes(self) -> int:
        return self.add + self.change + self.destroy

    @property
    def line(self) -> str:
        if not self.changes:
            return "No changes"
        return (
            f"Plan: {self.add} to add, {self.change} to change, {self.destroy} to destroy, "
            f"{self.same} unchanged"
        )


@dataclass(frozen=True)
class StackChanges:
    """What one change does (a diff, a preview) or did (an ``up``, a ``destroy``) to a stack."""

    operation: str  # what produced it: diff | preview | up | destroy (remove runs as an up)
    project: str
    stack: str
    # A run's: stack keys in stack order, then the keys it deleted; a diff's: most
    # consequential first (``most_consequential_first``, the order reviewers read).
    replicas: tuple[KeyChange, ...]
    renames: tuple[Rename, ...] = ()
    drift: tuple[Drift, ...] = ()  # found by a run's refresh
    left: tuple[Left, ...] = ()  # a run's objects of keys its caller did not name
    notes: tuple[str, ...] = ()
    namespace: str | None = None  # None: a diff of a stack without objects on either side
    # Every key verified unchanged against the cluster: the engine did not run.
    verified_unchanged: bool = False
    policy: tuple[PolicyFinding, ...] = ()
    # The stack file's version a run applied, read from a ConfigMap (``up --configmap``).
    desired: DesiredVersion | None = None

    @property
    def summary(self) -> Summary:
        return Summary.of(replica.change for replica in self.replicas)

    @property
    def deleted_keys(self) -> list[str]:
        return sorted(r.external_key for r in self.replicas if r.change == "delete")

    def replica(self, external_key: str) -> KeyChange | None:
        return next((r for r in self.replicas if r.external_key == external_key), None)

    @property
    def breaks_policy(self) -> bool:
        """The change brings a mandatory policy violation its base did not have."""
        return any(p.status == "new" and p.finding.enforcement == "mandatory" for p in self.policy)

    def findings_of(self, external_key: str | None) -> tuple[PolicyFinding, ...]:
        """The policy's findings on one key (None: the stack's as a whole)."""
        return tuple(p for p in self.policy if p.finding.external_key == external_key)


def key_change(changes: Iterable[Change]) -> Change:
    """The one key rule (module docstring) over the changes of a key's objects."""
    found = set(changes)
    if found <= {"same"}:
        return "same"
    if found in ({"create"}, {"delete"}):
        return next(iter(found))
    return "replace" if "replace" in found or {"create", "delete"} <= found else "update"


def most_consequential_first(replicas: Iterable[KeyChange]) -> tuple[KeyChange, ...]:
    return tuple(sorted(replicas, key=lambda r: (SEVERITY[r.change], r.external_key)))


def _at(document: Any, path: Sequence[str]) -> Any:
    for part in path:
        document = document.get(part) if isinstance(document, Mapping) else None
    return document


def _cleaned(*objects: Manifest | None) -> list[dict[str, Any] | None]:
    return [None if obj is None else yamldiff.clean(obj) for obj in objects]


def _change(before: dict[str, Any] | None, after: dict[str, Any] | None) -> Change:
    if before is None:
        return "same" if after is None else "create"
    if after is None:
        return "delete"
    if before == after:
        return "same"
    kind = KINDS.get(str(after.get("kind")))
    immutable = IDENTITY_FIELDS + (kind.immutable if kind else ())
    if any(_at(before, path) != _at(after, path) for path in immutable):
        return "replace"
    return "update"


def _fields(before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[str, ...]:
    if before is None or after is None:
        return ()
    return tuple(sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)))


def object_change(
    old: Manifest | None, new: Manifest | None, *, change: Change | None = None
) -> ObjectChange:
    """One object between two versions of it (``None``: absent on that side). ``change``: the
    engine's own decision, when an engine made one; else the object rule decides."""
    before, after = _cleaned(old, new)
    either = after if after is not None else before
    assert either is not None, "an object absent on both sides has no change"
    decided = change or _change(before, after)
    return ObjectChange(
        kind=str(either.get("kind")),
        name=str((either.get("metadata") or {}).get("name")),
        change=decided,
        fields=_fields(before, after),
        diff="" if decided == "same" else yamldiff.diff_clean(before, after),
    )


def external_key(obj: Manifest) -> str:
    return str(obj["metadata"]["annotations"][naming.ANNOTATION_EXTERNAL_KEY])


def by_key(objects: Iterable[Manifest]) -> dict[str, list[Manifest]]:
    grouped: dict[str, list[Manifest]] = {}
    for obj in objects:
        grouped.setdefault(external_key(obj), []).append(obj)
    return grouped


def compare(
    before: Mapping[str, Sequence[Manifest]], after: Mapping[str, Sequence[Manifest]]
) -> list[KeyChange]:
    """Per external key (objects grouped by ``by_key``), each object matched by kind and name;
    most consequential first."""
    replicas = []
    for key in before.keys() | after.keys():
        olds = {(o["kind"], o["metadata"]["name"]): o for o in before.get(key, [])}
        news = {(o["kind"], o["metadata"]["name"]): o for o in after.get(key, [])}
        objects = tuple(
            object_change(olds.get(ident), news.get(ident))
            for ident in sorted(olds.keys() | news.keys())
        )
        replicas.append(KeyChange(key, key_change(o.change for o in objects), objects))
    return list(most_consequential_first(replicas))


def stack_changes(
    *,
    operation: str,
    project: str,
    stack: str,
    old: Sequence[Manifest],
    new: Sequence[Manifest],
    notes: Sequence[str] = (),
    policy: Sequence[PolicyFinding] = (),
) -> StackChanges:
    """Compare two renderings of one stack (e.g. at a base ref and at head); its namespace is
    the new objects' (the old ones' when there are none)."""
    before, after = by_key(old), by_key(new)
    replicas = compare(before, after)
    namespaces = [obj["metadata"]["namespace"] for obj in [*new, *old]]
    renames = find_renames(
        {r.external_key: before[r.external_key] for r in replicas if r.change == "delete"},
        {r.external_key: after[r.external_key] for r in replicas if r.change == "create"},
    )
    return StackChanges(
        operation=operation,
        project=project,
        stack=stack,
        replicas=tuple(replicas),
        renames=tuple(renames),
        notes=tuple(notes),
        namespace=namespaces[0] if namespaces else None,
        policy=tuple(policy),
    )
