"""What Pulumi's DIY backends keep of a stack besides its checkpoint, and which of it may go:
pure decisions over key names, the same on every blob store (a directory, S3, PostgreSQL).

Every update (``up``, ``destroy``; never a preview) writes two objects into the stack's history,
``.pulumi/history/<project>/<stack>/<stack>-<unix nanos>.history.json`` (what ran, its config
and counts: what ``pulumi stack history`` lists) and ``…-<nanos>.checkpoint.json`` (a whole copy
of the checkpoint), and never removes either. It also copies the checkpoint to
``.pulumi/backups/<project>/<stack>/<stack>.<nanos>.json`` unless
``PULUMI_DIY_BACKEND_DISABLE_CHECKPOINT_BACKUPS`` is set, and, on every write of the checkpoint,
copies the previous one to ``<checkpoint>.bak``, which no variable turns off. With
``PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS`` it would keep yet another copy per write. All of it
lives in the backend itself (under the bucket's prefix, or a PostgreSQL URL's database name),
not under ``PULUMI_HOME``. Compressed states add ``.gz`` or ``.zst`` to each name.

``surplus`` names what to delete so that a stack keeps its ``keep`` newest updates and no
backup. It only ever names objects in exactly that layout: a key it does not recognise is
kept, and the checkpoint is never one of its answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

BOOKKEEPING = ".pulumi"
COMPRESSIONS = ("", ".gz", ".zst")
# Set to turn off the per-update copy under .pulumi/backups.
DISABLE_BACKUPS = "PULUMI_DIY_BACKEND_DISABLE_CHECKPOINT_BACKUPS"
# Set to keep a timestamped copy beside the checkpoint on every write.
RETAIN_CHECKPOINTS = "PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS"
_UPDATE = re.compile(
    r"(?P<stack>.+)-(?P<stamp>[0-9]+)\.(?:history|checkpoint)\.json(?:\.gz|\.zst)?"
)
_BACKUP = re.compile(r"(?P<stack>.+)\.[0-9]+\.json(?:\.gz|\.zst)?")


@dataclass(frozen=True)
class Layout:
    """Where one stack's extra copies live, as keys of its backend's blob store."""

    project: str
    stack: str

    @property
    def history(self) -> str:
        """The prefix of every history object of the stack (it ends in ``/``)."""
        return f"{BOOKKEEPING}/history/{self.project}/{self.stack}/"

    @property
    def backups(self) -> str:
        return f"{BOOKKEEPING}/backups/{self.project}/{self.stack}/"

    @property
    def checkpoint(self) -> str:
        """The checkpoint's key but for its compression's suffix: a prefix of it and its copies."""
        return f"{BOOKKEEPING}/stacks/{self.project}/{self.stack}.json"

    @property
    def checkpoint_backups(self) -> tuple[str, ...]:
        """The ``.bak`` copies the backend writes beside the checkpoint, one per compression."""
        return tuple(f"{self.checkpoint}{suffix}.bak" for suffix in COMPRESSIONS)


def variables(*, keep_backups: bool) -> dict[str, str]:
    """What tells the engine to write no backup copies (none but ``.bak``, which only
    ``surplus`` removes), unless they are asked for."""
    if keep_backups:
        return {}
    return {DISABLE_BACKUPS: "true", RETAIN_CHECKPOINTS: "false"}


def surplus(
    layout: Layout, keys: Iterable[str], *, keep: int | None, keep_backups: bool
) -> list[str]:
    """Of ``keys`` (the stack's history and backup objects, as listed under ``layout``'s
    prefixes, and any ``.bak`` of its checkpoint), those to delete: every object of an update
    older than the ``keep`` newest (None: keep every update), and, unless ``keep_backups``,
    every backup copy. Sorted, for a stable order of deletion."""
    listed = list(keys)
    found = updates(layout, listed)
    old = [] if keep is None else sorted(found, reverse=True)[keep:]
    doomed = [key for stamp in old for key in found[stamp]]
    if not keep_backups:
        doomed.extend(key for key in listed if _is_backup(layout, key))
    return sorted(doomed)


def updates(layout: Layout, keys: Iterable[str]) -> Mapping[int, list[str]]:
    """The updates among ``keys``, by their stamp (the nanoseconds in their names): the
    history record and checkpoint copy of each."""
    found: dict[int, list[str]] = {}
    for key in keys:
        stamp = _update_stamp(layout, key)
        if stamp is not None:
            found.setdefault(stamp, []).append(key)
    return found


def _update_stamp(layout: Layout, key: str) -> int | None:
    if not key.startswith(layout.history):
        return None
    match = _UPDATE.fullmatch(key.removeprefix(layout.history))
    if match is None or match["stack"] != layout.stack:
        return None
    return int(match["stamp"])


def _is_backup(layout: Layout, key: str) -> bool:
    if key in layout.checkpoint_backups:
        return True
    if not key.startswith(layout.backups):
        return False
    match = _BACKUP.fullmatch(key.removeprefix(layout.backups))
    return match is not None and match["stack"] == layout.stack
