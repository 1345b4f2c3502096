"""The runner image's hash lock: it names exactly the runtime set at ``constraints.txt``'s pins,
and the image's install refuses a wheel whose bytes differ from the lock (a real ``pip`` against
the package index, on a checkout made here)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from infercrane_dev import REPO_ROOT
from infercrane_dev.images.build import ImageBuildError
from infercrane_dev.images.runner import site_packages
from infercrane_dev.images.wheel_lock import lock_path, locked_pins

# The image's interpreter, as markers see it (Debian 12's CPython 3.11 on x86_64 Linux).
IMAGE_MARKERS = {
    "python_version": "3.11",
    "python_full_version": "3.11.2",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
LOCK = lock_path(REPO_ROOT).read_text(encoding="utf-8")


def runtime_closure() -> dict[str, str]:
    """``name -> version`` of what ``infercrane-pulumi`` needs in the image, read from the
    installed distributions' metadata (the development environment holds the same pins)."""
    found: dict[str, str] = {}
    todo = [Requirement("infercrane-pulumi")]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        requirement = todo.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in done:
            continue
        done.add((name, frozenset(requirement.extras)))
        dist = metadata.distribution(name)
        found[name] = dist.version
        for text in dist.requires or []:
            needed = Requirement(text)
            extras = ("", *requirement.extras)
            if needed.marker is None or any(
                needed.marker.evaluate({**IMAGE_MARKERS, "extra": extra}) for extra in extras
            ):
                todo.append(needed)
    found.pop("infercrane-pulumi")
    return found


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (REPO_ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_the_lock_names_exactly_the_runtime_set_at_the_constraints_pins() -> None:
    locked = locked_pins(LOCK)
    assert locked == runtime_closure(), "the lock is stale: run `make runner-lock`"
    pins = constraints()
    assert {name: pins.get(name) for name in locked} == locked, "run `make runner-lock`"
    assert all(" --hash=sha256:" in line for line in LOCK.splitlines() if line[:1] != "#")


def fake_checkout(root: Path, lock: str) -> Path:
    """A checkout of one package that needs ``idna``, with ``lock`` as its runner lock."""
    (root / "lockprobe").mkdir(parents=True)
    (root / "lockprobe" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=70"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "lockprobe"\nversion = "1.0"\ndependencies = ["idna"]\n'
        '[tool.setuptools]\npackages = ["lockprobe"]\n',
        encoding="utf-8",
    )
    lock_path(root).parent.mkdir(parents=True)
    lock_path(root).write_text(lock, encoding="utf-8")
    return root


def idna_line() -> str:
    [line] = [x for x in LOCK.splitlines() if x.startswith("idna==")]
    return line


def test_the_image_installs_the_locked_wheels(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path / "checkout", idna_line() + "\n")
    site_packages(checkout, tmp_path / "site")
    installed = {
        dist.metadata["Name"]: dist.version
        for dist in metadata.distributions(path=[str(tmp_path / "site")])
    }
    assert installed == {"lockprobe": "1.0", "idna": locked_pins(LOCK)["idna"]}


def test_a_wheel_whose_bytes_differ_from_the_lock_is_refused(tmp_path: Path) -> None:
    pin = idna_line().split()[0]
    checkout = fake_checkout(tmp_path / "checkout", f"{pin} --hash=sha256:{'0' * 64}\n")
    with pytest.raises(ImageBuildError) as refused:
        site_packages(checkout, tmp_path / "site")
    assert str(refused.value) == (
        "runner image: pip install --target failed: THESE PACKAGES DO NOT MATCH THE HASHES "
        f"FROM THE REQUIREMENTS FILE ({pin})"
    )
    assert not list((tmp_path / "site").glob("idna*"))


def test_a_dependency_the_lock_does_not_name_is_refused(tmp_path: Path) -> None:
    checkout = fake_checkout(tmp_path / "checkout", "")
    with pytest.raises(ImageBuildError) as refused:
        site_packages(checkout, tmp_path / "site")
    assert str(refused.value) == (
        "runner image: pip install --target failed: In --require-hashes mode, all requirements "
        "must have their versions pinned with =="
    )
