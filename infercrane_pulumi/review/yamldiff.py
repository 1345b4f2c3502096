"""A reviewer's diff of one Kubernetes object: only the fields that change, as unified YAML.

A whole-object diff buries a one-line change under a hundred unchanged lines. Here the walk
descends only into what differs: a changed mapping shows its key as a context line, a list whose
items Kubernetes merges by ``name`` (containers, ports, env, volumes) shows the changed item's
``name`` as context, and any other changed value (a scalar, an argv list) is shown whole on both
sides. So every changed line comes with the path that locates it, and nothing unchanged beyond
that path appears.

It reads rendered manifests and the old/new inputs of Pulumi engine events alike: keys starting
with ``__`` are Pulumi's bookkeeping and are dropped, and secret values (the engine's
``"[secret]"`` or a secret signature object) read ``[secret]`` before anything is compared or
printed, so a secret's value can never reach a diff. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

import yaml

from infercrane_pulumi.objects.manifests import YAML_DUMPER

SECRET = "[secret]"
# How Pulumi marks a secret in serialized property values: {SIG_KEY: SECRET_SIG, "value": ...}.
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
INDENT = "  "

_ABSENT = object()  # a key or list item one side does not have


def clean(value: Any) -> Any:
    """``value`` as plain JSON-like data: secrets masked, Pulumi-internal keys dropped."""
    if isinstance(value, Mapping):
        if value.get(SIG_KEY) == SECRET_SIG:
            return SECRET
        return {str(k): clean(v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [clean(item) for item in value]
    return value


def diff_objects(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> str:
    """Unified-diff lines (``-``, ``+``, context `` ``) of the fields that differ; ``""`` when
    nothing does. A created object is all ``+``, a deleted one all ``-``."""
    return diff_clean(None if old is None else clean(old), None if new is None else clean(new))


def diff_clean(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """``diff_objects`` of values that went through ``clean`` already (once is enough: it
    walks every field)."""
    if before == after:
        return ""
    if before is None or after is None:
        lines = _signed(*[[] if side is None else _yaml(side) for side in (before, after)])
    else:
        lines = _mapping(before, after, "")
    return "".join(line + "\n" for line in lines)


def _yaml(value: Any, pad: str = "") -> list[str]:
    text = yaml.dump(
        value,
        Dumper=YAML_DUMPER,
        sort_keys=True,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 20,  # never fold a long value: a folded line would diff as a change
    )
    return [pad + line for line in text.splitlines()]


def _signed(before: list[str], after: list[str]) -> list[str]:
    """Line diff of two YAML texts; equal lines stay as context (an argv list's other entries)."""
    lines: list[str] = []
    matcher = SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            lines += [" " + line for line in before[i1:i2]]
        else:
            lines += ["-" + line for line in before[i1:i2]]
            lines += ["+" + line for line in after[j1:j2]]
    return lines


def _mapping(old: Mapping[str, Any], new: Mapping[str, Any], pad: str) -> list[str]:
    lines: list[str] = []
    for key in sorted(old.keys() | new.keys()):
        a, b = old.get(key, _ABSENT), new.get(key, _ABSENT)
        if a == b:
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            lines += [" " + _key_line(key, pad), *_mapping(a, b, pad + INDENT)]
        elif _merged_by_name(a, b):
            lines += [" " + _key_line(key, pad), *_named_items(a, b, pad)]
        else:
            lines += _signed(*[[] if v is _ABSENT else _yaml({key: v}, pad) for v in (a, b)])
    return lines


def _key_line(key: str, pad: str) -> str:
    # YAML's own spelling of the key (quoted when it must be), as its block mapping opens it.
    return _yaml({key: {"": None}}, pad)[0]


def _names(items: Any) -> list[str] | None:
    if not isinstance(items, list) or not items:
        return None
    names = [item.get("name") for item in items if isinstance(item, dict)]
    named = [name for name in names if isinstance(name, str)]
    return named if len(named) == len(set(named)) == len(items) else None


def _merged_by_name(old: Any, new: Any) -> bool:
    """Both sides are lists of uniquely named items kept in the same relative order (else a
    reorder would not show, and the whole list is the change)."""
    a, b = _names(old), _names(new)
    if a is None or b is None:
        return False
    return [n for n in a if n in b] == [n for n in b if n in a]


def _named_items(old: list[dict[str, Any]], new: list[dict[str, Any]], pad: str) -> list[str]:
    before = {item["name"]: item for item in old}
    after = {item["name"]: item for item in new}
    lines: list[str] = []
    for name in [*before, *(n for n in after if n not in before)]:
        a, b = before.get(name, _ABSENT), after.get(name, _ABSENT)
        if a == b:
            continue
        if a is _ABSENT or b is _ABSENT:
            lines += _signed(*[[] if v is _ABSENT else _yaml([v], pad) for v in (a, b)])
            continue
        # The item's name is its context line; its other fields diff one level deeper.
        lines.append(" " + _yaml([{"name": name}], pad)[0])
        lines += _mapping(_without_name(a), _without_name(b), pad + INDENT)
    return lines


def _without_name(item: Any) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "name"}
