"""Bounded state: after a run's engine update, delete what Pulumi's DIY backend kept of the
stack beyond the environment's retention, through the blob store the backend itself uses.

Every update adds a whole copy of the checkpoint to the stack's history, and Pulumi never
removes one (``engine.history``): without this a stack's storage grows by a checkpoint per run
for ever. What goes is decided by ``engine.history.surplus`` (the updates older than the
``kept_updates`` newest, and every backup copy unless ``keep_backups``); the checkpoint itself
is never listed, let alone deleted. The stores are the backend's own (``blobs``). Another
backend (``gs://``, ``azblob://``) is not pruned: the engine writes no backups there, but its
history grows as Pulumi's does.

``run`` prunes only after an update succeeded, while it still holds the stack (its lease, or
this process's guard on a file backend): the history then holds that update. A concurrent
writer (a person's ``pulumi up`` beside a file backend) can only add newer updates, which the
pruning never names, so a kept update is never deleted.
"""

from __future__ import annotations

from infercrane_pulumi.automation import project
from infercrane_pulumi.automation.engine import history
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.state import blobs
from infercrane_pulumi.errors import ConfigError

KEEP_ALL_HINT = "INFERCRANE_KEPT_UPDATES=all, or PulumiEnvironment(kept_updates=None)"


def store(env: PulumiEnvironment) -> blobs.Store | None:
    """The blob store of ``env``'s backend; None when nothing needs pruning (retention off) or
    this module has no way to the backend (``gs://``, ``azblob://``: their history grows as
    Pulumi's does). An S3 backend without keys in the environment is a ``ConfigError``, before
    anything is written: its history would grow unseen."""
    if env.kept_updates is None and env.keep_backups:
        return None
    try:
        return blobs.opened(env)
    except ConfigError as error:
        if env.kept_updates is None:
            return None  # no update is pruned; the engine writes no backups, one .bak stays
        raise ConfigError(f"{error.problems[0]}; or keep every update ({KEEP_ALL_HINT})") from None


def prune(found: blobs.Store, stack_name: str, env: PulumiEnvironment) -> list[str]:
    """Delete what the stack keeps beyond ``env``'s retention; the keys deleted."""
    layout = history.Layout(project.PROJECT_NAME, stack_name)
    listed = found.keys([layout.history, layout.backups, layout.checkpoint])
    doomed = history.surplus(layout, listed, keep=env.kept_updates, keep_backups=env.keep_backups)
    found.delete(doomed)
    return doomed
