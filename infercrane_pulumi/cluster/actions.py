"""What a run does with each of its objects, as the verdict (``verdict.judge``) decides it:
keep, apply, refuse, delete or leave, and why; and what the run's readers ask of the whole
verdict (its refusals, the keys it keeps, what it applies and deletes). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infercrane_pulumi.cluster.api import object_subject
from infercrane_pulumi.objects.manifests import Manifest

Action = Literal["keep", "apply", "refuse", "delete", "leave"]
Doomed = tuple[Manifest, str]  # an object, and the uid it must still have


@dataclass(frozen=True)
class ObjectVerdict:
    """What a run does with one object, and why."""

    action: Action
    manifest: Manifest  # the desired object; for a deletion, the live one's kind and name
    key: str
    uid: str | None = None  # the live object's, which a deletion must still find
    reasons: tuple[str, ...] = ()

    @property
    def subject(self) -> str:
        return object_subject(self.manifest)


@dataclass(frozen=True)
class Verdict:
    """The run's objects, each judged once, and what differs from the last apply."""

    objects: tuple[ObjectVerdict, ...]
    # What a refresh would find: an applied object gone, or carrying another intent.
    drift: tuple[str, ...] = ()
    # Why the run must not go on: it would delete every replica, not on purpose (empty: it may).
    emptying: tuple[str, ...] = ()

    def refusals(self) -> list[str]:
        return [reason for o in self.objects if o.action == "refuse" for reason in o.reasons]

    def kept(self) -> frozenset[str]:
        """The keys whose every object is kept: the engine need not touch them."""
        judged: dict[str, set[Action]] = {}
        for found in self.objects:
            if found.action not in ("delete", "leave"):
                judged.setdefault(found.key, set()).add(found.action)
        return frozenset(key for key, actions in judged.items() if actions == {"keep"})

    def applied(self) -> list[Manifest]:
        return [o.manifest for o in self.objects if o.action == "apply"]

    def doomed(self) -> list[Doomed]:
        return [(o.manifest, o.uid) for o in self.objects if o.action == "delete" and o.uid]

    def left(self) -> list[ObjectVerdict]:
        """The objects of ours this run leaves because its caller did not name their key."""
        return [o for o in self.objects if o.action == "leave"]

    def reasons(self) -> dict[str, tuple[str, ...]]:
        """Per key: why each of its objects is not kept (empty: all are)."""
        found: dict[str, tuple[str, ...]] = {}
        for o in self.objects:
            if o.key:  # a refusal of no key (a kind it may not list) refuses the whole run
                kept = o.action == "keep"
                found[o.key] = found.get(o.key, ()) + tuple(
                    () if kept else (f"{o.subject}: {o.action}: {r}" for r in o.reasons)
                )
        return found
