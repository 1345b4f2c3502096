"""The blobs a DIY backend keeps, reached the way the backend itself stores them: a local
directory (files, and the blob driver's ``.attrs`` beside each), an S3 bucket (``s3``), a
PostgreSQL state table (``leasedb``). What the state's retention prunes (``retention``), and
the stack locks a run under a lease reads one by one before it breaks any (``recovery``).
Another backend (``gs://``, ``azblob://``) has no store here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from infercrane_pulumi.automation.engine.checkpoints import ATTRIBUTES
from infercrane_pulumi.automation.engine.process import inherited
from infercrane_pulumi.automation.environment import PulumiEnvironment
from infercrane_pulumi.automation.state import backends, leasedb, s3
from infercrane_pulumi.errors import BackendUnavailableError


class Store(Protocol):
    def keys(self, prefixes: Sequence[str]) -> list[str]: ...

    def read(self, key: str) -> bytes | None: ...

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

    def read(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise _unavailable(self.root, error) from None

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

    def read(self, key: str) -> bytes | None:
        return s3.get(self.where, key)

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

    def read(self, key: str) -> bytes | None:
        return leasedb.state_value(self.database, self.prefix + key)

    def delete(self, keys: Sequence[str]) -> None:
        if keys:
            leasedb.delete_state_keys(self.database, [self.prefix + key for key in keys])


def opened(env: PulumiEnvironment) -> Store | None:
    """The blob store of ``env``'s backend (None: a backend without one here). An S3 backend
    without keys in the environment is a ``ConfigError``."""
    if env.state_dir is not None:
        return Directory(env.state_dir)
    url = env.backend
    database = env.state_database
    if database is not None:  # the state's own, never the leases' (they may be elsewhere)
        return Table(database, _prefix(url))
    if urlsplit(url).scheme != s3.SCHEME:
        return None
    # The keys the engine gets: this process's environment, then the backend's variables.
    return Bucket(s3.bucket(url, {**inherited(os.environ), **env.backend_variables}))


def _prefix(url: str) -> str:
    path = urlsplit(url).path.strip("/")
    return f"{path}/" if path else ""


def _unavailable(root: Path, error: OSError) -> BackendUnavailableError:
    return BackendUnavailableError(f"backend {root}: cannot read or change ({error.strerror})")
