"""Read-only questions to the git repository under review: what a revision holds, and whether
the working tree differs from it.

The offline diff compares a base revision with the working tree without checking anything out:
files are read with ``git ls-tree``/``cat-file`` and a revision's files are exported with
``git archive`` into a directory the caller owns, so the repository, its index and its worktree
list are never written (nothing is left behind by an interrupted run). Every failure is a
``ConfigError`` of one line.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from infercrane_pulumi.errors import ConfigError

GIT_TIMEOUT_SECONDS = 120


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", "-C", str(cwd), *args],
            capture_output=True,
            check=False,
            timeout=GIT_TIMEOUT_SECONDS,
        )
    except FileNotFoundError as error:
        raise ConfigError("git: not found on PATH") from error


@dataclass(frozen=True)
class Repository:
    root: Path

    def _run(self, *args: str) -> bytes:
        done = _git(self.root, *args)
        if done.returncode != 0:
            reason = done.stderr.decode(errors="replace").strip().splitlines() or ["failed"]
            raise ConfigError(f"git {args[0]}: {reason[-1]}")
        return done.stdout

    def commit(self, ref: str) -> str | None:
        """The commit ``ref`` names, or None when it names none."""
        # --end-of-options: a ref is never read as an option, whatever it is spelled like.
        peeled = f"{ref}^{{commit}}"
        done = _git(self.root, "rev-parse", "--verify", "--quiet", "--end-of-options", peeled)
        return done.stdout.decode().strip() if done.returncode == 0 else None

    def read(self, commit: str, path: str) -> str | None:
        """The text of ``path`` at ``commit``; None when the revision has no such file."""
        entry = self._run("ls-tree", "-z", commit, "--", path).split(b"\0")[0]
        if not entry:
            return None
        mode_type_sha, _ = entry.split(b"\t", 1)
        _, kind, sha = mode_type_sha.decode().split()
        if kind != "blob":
            return None
        return self._run("cat-file", "blob", sha).decode("utf-8", errors="replace")

    def files(self, commit: str, directory: str) -> list[str]:
        """Paths of the files directly in ``directory`` at ``commit``."""
        listed = self._run("ls-tree", "-z", "--name-only", commit, "--", f"{directory}/")
        return sorted(name.decode() for name in listed.split(b"\0") if name)

    def differs(self, commit: str, directory: str) -> bool:
        """Whether the working tree's ``directory`` differs from ``commit``'s, counting files
        git does not track yet (and does not ignore)."""
        changed = _git(self.root, "diff", "--quiet", commit, "--", directory)
        if changed.returncode not in (0, 1):
            raise ConfigError(f"git diff: {changed.stderr.decode(errors='replace').strip()}")
        untracked = self._run("ls-files", "-z", "--others", "--exclude-standard", "--", directory)
        return changed.returncode == 1 or bool(untracked)

    def export(self, commit: str, paths: Sequence[str], into: Path) -> None:
        """Write ``paths`` (files or directories) as ``commit`` holds them below ``into``."""
        archive = self._run("archive", "--format=tar", commit, "--", *paths)
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")


def open_repository(path: Path) -> Repository:
    done = _git(path, "rev-parse", "--show-toplevel") if path.is_dir() else None
    if done is None or done.returncode != 0:
        raise ConfigError(f"{path}: not a git repository")
    return Repository(Path(done.stdout.decode().strip()))
