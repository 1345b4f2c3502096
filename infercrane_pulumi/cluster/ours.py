"""Is a live object exactly ours: the one definition of "ours" (our marks, our key, our stack)
that the verdict, ``inspect`` and ``doctor`` share, and whether a manager holds fields of it
that pulumi-kubernetes would silently take over. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infercrane_pulumi.cluster.api import object_subject
from infercrane_pulumi.objects import naming
from infercrane_pulumi.objects.manifests import Manifest

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
