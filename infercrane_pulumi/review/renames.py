"""Renames in a change: a key deleted and a key created whose objects differ only by the key
(their names, hashes and the key itself), shown to a reviewer as one rename. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infercrane_pulumi.objects import naming
from infercrane_pulumi.review import yamldiff

Manifest = Mapping[str, Any]


@dataclass(frozen=True)
class Rename:
    """A key deleted and a key created whose intents are otherwise equal."""

    old_key: str
    new_key: str


def _shape(key: str, objects: Sequence[Manifest]) -> str:
    """The objects with everything derived from the key blanked out (names, hashes, the key
    itself): two keys with the same shape have the same intent but for the key."""
    name, digest = naming.object_name(key), naming.key_hash(key)
    keyed = {naming.ANNOTATION_EXTERNAL_KEY, naming.ANNOTATION_INTENT_HASH}

    def blank(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: blank(v) for k, v in value.items() if k not in keyed}
        if isinstance(value, list):
            return [blank(item) for item in value]
        if isinstance(value, str):
            return value.replace(name, "<name>").replace(digest, "<hash>")
        return value

    shaped = sorted((blank(yamldiff.clean(obj)) for obj in objects), key=lambda o: o["kind"])
    return json.dumps(shaped, sort_keys=True)


def find_renames(
    deleted: Mapping[str, Sequence[Manifest]], created: Mapping[str, Sequence[Manifest]]
) -> list[Rename]:
    """Pairs of a deleted and a created key whose objects differ only by the key; each key is
    paired at most once, in key order."""
    candidates: dict[str, list[str]] = {}
    for key in sorted(created):
        candidates.setdefault(_shape(key, created[key]), []).append(key)
    renames = []
    for key in sorted(deleted):
        twins = candidates.get(_shape(key, deleted[key]))
        if twins:
            renames.append(Rename(old_key=key, new_key=twins.pop(0)))
    return renames
