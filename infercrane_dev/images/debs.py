"""Files from pinned Debian packages, for images whose programs Debian builds (iptables).

A package is pinned by name, version and the sha256 of its ``.deb``; :func:`fetch` gets it with
``apt-get download`` (apt checks it against Debian's signed indexes, then this module checks the
pin) into a cache directory, once. :func:`read_files` reads a package's files straight from the
``.deb`` (an ``ar`` archive whose ``data.tar.*`` holds them): nothing is installed, no
maintainer script runs, and the host's own packages are never touched.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import subprocess
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from .ocilayout import Member

_AR_MAGIC = b"!<arch>\n"
_AR_HEADER = 60


class DebError(RuntimeError):
    """A pinned package could not be fetched, did not match its pin, or is not a .deb."""


@dataclass(frozen=True)
class DebPin:
    name: str
    version: str
    sha256: str
    architecture: str = "amd64"

    @property
    def spec(self) -> str:
        return f"{self.name}={self.version}"

    @property
    def filename(self) -> str:
        """The name ``apt-get download`` gives the file (an epoch's colon is %3a)."""
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.architecture}.deb"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(pins: Iterable[DebPin], cache: Path) -> dict[str, Path]:
    """Each pinned package's ``.deb`` in ``cache`` (downloaded when absent): name -> path."""
    cache.mkdir(parents=True, exist_ok=True)
    found = {}
    for pin in pins:
        path = cache / pin.filename
        if not path.is_file():
            done = subprocess.run(
                ["apt-get", "download", "-q", pin.spec],
                cwd=cache,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0 or not path.is_file():
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise DebError(
                    f"{pin.spec}: apt-get download failed ({last}); the pin may be gone from "
                    "Debian's mirror, or its package lists are missing (hack/host-packages.sh)"
                )
        got = _sha256(path)
        if got != pin.sha256:
            path.unlink()
            raise DebError(f"{pin.spec}: sha256 {got}, pinned {pin.sha256}")
        found[pin.name] = path
    return found


def _ar_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    if not data.startswith(_AR_MAGIC):
        raise DebError("not an ar archive")
    offset = len(_AR_MAGIC)
    while offset + _AR_HEADER <= len(data):
        header = data[offset : offset + _AR_HEADER]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        start = offset + _AR_HEADER
        yield name, data[start : start + size]
        offset = start + size + (size % 2)  # members are 2-byte aligned


def read_files(deb: Path, patterns: Iterable[str]) -> list[Member]:
    """The package's files, links and directories whose absolute path matches a pattern
    (fnmatch), as image members (root-owned, the package's modes)."""
    wanted = tuple(patterns)
    [data_tar] = [blob for name, blob in _ar_members(deb.read_bytes()) if name.startswith("data.")]
    members = []
    with tarfile.open(fileobj=io.BytesIO(data_tar), mode="r:*") as tar:
        for info in tar:
            path = "/" + info.name.removeprefix("./").rstrip("/")
            if not any(fnmatch.fnmatchcase(path, pattern) for pattern in wanted):
                continue
            if info.isdir():
                members.append(Member(path.lstrip("/"), info.mode))
            elif info.issym():
                members.append(Member(path.lstrip("/"), 0o777, link=info.linkname))
            elif info.isfile():
                extracted = tar.extractfile(info)
                assert extracted is not None
                members.append(Member(path.lstrip("/"), info.mode, extracted.read()))
    return members


def files(debs: Mapping[str, Path], package: str, patterns: Iterable[str]) -> list[Member]:
    """:func:`read_files` of a fetched package; refuses a pattern that matches nothing (a
    package whose layout changed must not yield an image silently missing a file)."""
    wanted = tuple(patterns)
    found = read_files(debs[package], wanted)
    for pattern in wanted:
        if not any(fnmatch.fnmatchcase("/" + member.path, pattern) for member in found):
            raise DebError(f"{package}: no file matches {pattern}")
    return found
