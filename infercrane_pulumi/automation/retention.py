"""Bounded state: after a run's engine update, delete what Pulumi's DIY backend kept of the
stack beyond the environment's retention, through the blob store the backend itself uses.

Every update adds a whole copy of the checkpoint to the stack's history, and Pulumi never
removes one (``engine.history``): without this a stack's storage grows by a checkpoint per run
for ever. What goes is decided by ``engine.history.surplus`` (the updates older than the
``kept_updates`` newest, and every backup copy unless ``keep_backups``); the checkpoint itself
is never listed, let alone deleted. The stores: a local directory (files, and the blob
driver's ``.attrs`` beside each), an S3 bucket (``s3``), a PostgreSQL state table
(``leasedb``). Another backend (``gs://``, ``azblob://``) is not pruned: the engine writes no
backups there, but its history grows as Pulumi's does.

``run`` prunes only after an update succeeded, while it still holds the stack (its lease, or
this process's guard on a file backend): the history then holds that update. A concurrent
writer (a person's ``pulumi up`` beside a file backend) can only add newer updates, which the
pruning never names, so a kept update is never deleted.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from infercrane_pulumi.automation import backends, leasedb, project, s3
from infercrane_pulumi.automation.engine import history
from infercrane_pulumi.automation.engine.checkpoints import ATTRIBUTES
from infercrane_pulumi.automation.engine.process import inherited
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.errors import BackendUnavailableError, ConfigError

KEEP_ALL_HINT = "INFERCRANE_KEPT_UPDATES=all, or PulumiEnvironment(kept_updates=None)"


class Store(Protocol):
    def keys(self, prefixes: Sequence[str]) -> list[str]: ...

    def delete(self, keys: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class Directory:
    root: Path

    def keys(self, prefixes: Sequence[str]) -> list[str]:
        found: list[str] = []
        for prefix in prefixes:
            folder = self.root / prefix.rpartition("/")[0]
            try:
                files = [p for p in folder.rglob("*") if p.is_file()]
            except OSError as error:
                raise _unavailable(self.root, error) from None
            keys = (p.relative_to(self.root).as_posix() for p in files)
            found.extend(k for k in keys if k.startswith(prefix) and not k.endswith(ATTRIBUTES))
        return found

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            try:
                (self.root / key).unlink(missing_ok=True)
                (self.root / f"{key}{ATTRIBUTES}").unlink(missing_ok=True)
            except OSError as error:
                raise _unavailable(self.root, error) from None


@dataclass(frozen=True)
class Bucket:
    where: s3.Bucket

    def keys(self, prefixes: Sequence[str]) -> list[str]:
        return [key for prefix in prefixes for key in s3.keys(self.where, prefix)]

    def delete(self, keys: Sequence[str]) -> None:
        for key in keys:
            s3.delete(self.where, key)


@dataclass(frozen=True)
class Table:
    database: backends.Database
    prefix: str  # Pulumi keeps a backend's objects under its URL's database name

    def keys(self, prefixes: Sequence[str]) -> list[str]:
        found = leasedb.state_keys(self.database, [self.prefix + p for p in prefixes])
        return [key.removeprefix(self.prefix) for key in found]

    def delete(self, keys: Sequence[str]) -> None:
        if keys:
            leasedb.delete_state_keys(self.database, [self.prefix + key for key in keys])


def store(env: PulumiEnvironment) -> Store | None:
    """The blob store of ``env``'s backend; None when nothing needs pruning (retention off) or
    this module has no way to the backend (``gs://``, ``azblob://``: their history grows as
    Pulumi's does). An S3 backend without keys in the environment is a ``ConfigError``, before
    anything is written: its history would grow unseen."""
    if env.kept_updates is None and env.keep_backups:
        return None
    if env.state_dir is not None:
        return Directory(env.state_dir)
    url = env.backend
    database = env.state_database
    if database is not None:  # the state's own, never the leases' (they may be elsewhere)
        return Table(database, _prefix(url))
    if urlsplit(url).scheme != s3.SCHEME:
        return None
    try:
        # The keys the engine gets: this process's environment, then the backend's variables.
        return Bucket(s3.bucket(url, {**inherited(os.environ), **env.backend_variables}))
    except ConfigError as error:
        if env.kept_updates is None:
            return None  # no update is pruned; the engine writes no backups, one .bak stays
        raise ConfigError(f"{error.problems[0]}; or keep every update ({KEEP_ALL_HINT})") from None


def prune(found: Store, stack_name: str, env: PulumiEnvironment) -> list[str]:
    """Delete what the stack keeps beyond ``env``'s retention; the keys deleted."""
    layout = history.Layout(project.PROJECT_NAME, stack_name)
    listed = found.keys([layout.history, layout.backups, layout.checkpoint])
    doomed = history.surplus(layout, listed, keep=env.kept_updates, keep_backups=env.keep_backups)
    found.delete(doomed)
    return doomed


def _prefix(url: str) -> str:
    path = urlsplit(url).path.strip("/")
    return f"{path}/" if path else ""


def _unavailable(root: Path, error: OSError) -> BackendUnavailableError:
    return BackendUnavailableError(f"backend {root}: cannot prune its history ({error.strerror})")
