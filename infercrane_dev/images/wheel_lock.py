"""The runner image's runtime set, locked by hash: ``runner-requirements.txt`` beside this module.

Each line pins one distribution at ``constraints.txt``'s version and the sha256 of the one binary
wheel for CPython 3.11 on x86_64 Linux that the image installs, so an index that served other
bytes under the same version fails the build (``pip install --require-hashes``) instead of
shipping them. ``make runner-lock`` writes it again after ``constraints.txt`` changes (a unit test
says when they disagree); the checkout's own wheel is hashed as it is built.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename

from infercrane_dev import REPO_ROOT

from .build import ImageBuildError

LOCK_FILE = "runner-requirements.txt"  # beside this module, in every checkout
PYTHON_ABI = ("--implementation", "cp", "--python-version", "3.11", "--abi", "cp311")
WHEEL_PLATFORMS = tuple(
    f"--platform=manylinux{tag}_x86_64" for tag in ("_2_36", "_2_28", "_2_17", "2014")
)
_MISMATCHED = re.compile(r"(\S+==\S+) from \S+")  # pip's line naming a wheel of another hash
PIP = (sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet")
_HEADER = (
    "# The runner image's runtime set (infercrane_dev/images/wheel_lock.py): constraints.txt's\n"
    "# pins, one binary wheel each for CPython 3.11 on x86_64 Linux, by sha256.\n"
    "# Written by `make runner-lock`; do not edit.\n"
)


def lock_path(checkout: Path) -> Path:
    return checkout / "infercrane_dev" / "images" / LOCK_FILE


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_wheel(checkout: Path, wheels: Path) -> Path:
    """The checkout's own wheel, built into ``wheels``."""
    run([*PIP, "wheel", "--no-deps", "--wheel-dir", str(wheels), str(checkout)], "pip wheel")
    [wheel] = wheels.glob("*.whl")
    return wheel


def locked_lines(checkout: Path) -> str:
    """The lock's text: the checkout's runtime set as pip resolves it today for the image's
    Python and platform, at ``constraints.txt``'s pins, each wheel hashed as downloaded."""
    with tempfile.TemporaryDirectory(prefix="infercrane-runner-lock-") as work:
        own = build_wheel(checkout, Path(work) / "own")
        downloads = Path(work) / "downloads"
        run(
            [
                *PIP,
                "download",
                "--only-binary=:all:",
                *PYTHON_ABI,
                *WHEEL_PLATFORMS,
                "-c",
                str(checkout / "constraints.txt"),
                "--dest",
                str(downloads),
                str(own),
            ],
            "pip download",
        )
        own_name = parse_wheel_filename(own.name)[0]
        lines = []
        for wheel in sorted(downloads.glob("*.whl")):
            name, version, _, _ = parse_wheel_filename(wheel.name)
            if name != own_name:
                lines.append(f"{name}=={version} --hash=sha256:{sha256(wheel)}\n")
    return _HEADER + "".join(sorted(lines))


def locked_pins(text: str) -> dict[str, str]:
    """``name -> version`` of a lock's text (names canonical)."""
    pins: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            pin = line.split()[0]
            name, _, version = pin.partition("==")
            pins[canonicalize_name(name)] = version
    return pins


def run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ImageBuildError(f"runner image: {what} failed: {pip_failure(done.stderr)}")


def pip_failure(stderr: str) -> str:
    """One line of pip's failure: its first ``ERROR:`` sentence, with the distributions whose
    bytes differ from their hash, or its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    if not errors:
        return lines[-1] if lines else "no output"
    first = errors[0].split(". ")[0].rstrip(".")
    mismatched = [m[1] for line in lines if (m := _MISMATCHED.match(line))]
    return f"{first} ({', '.join(mismatched)})" if mismatched else first


def main() -> int:
    lock_path(REPO_ROOT).write_text(locked_lines(REPO_ROOT), encoding="utf-8")
    print(f"wrote {lock_path(REPO_ROOT).relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
