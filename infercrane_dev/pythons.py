"""`make test-pythons` (and `make test`): every supported Python, and the lowest allowed
dependencies, proven on the built wheel.

Builds the wheel and the sdist once (``python -m build``), then per variant a clean virtualenv
holding the wheel with its ``test`` extra:

- ``3.11``: constraints.txt's exact pins; the wheel's checks only, as `make test`'s own
  virtualenv (an editable install) runs every suite on 3.11.
- ``3.12``: constraints.txt's exact pins, as CI and development use them.
- ``3.13-lowest``: every direct runtime dependency at the lower bound pyproject declares, the
  rest as pip resolves them: a control plane on Python 3.13 with other, compatible versions
  (the Pulumi SDK 3.230 where we pin 3.272, pydantic 2.10 where we pin 2.14, an older
  Kubernetes client, psycopg and PyYAML).

The wheel's checks, outside the source tree: the public API imports from the installed wheel,
its types ship (``py.typed``) and ``infercrane-pulumi --version`` answers (in the 3.12 variant
also as ``pipx install`` puts it on a PATH). Then the unit tests and the conformance subset
(tests marked ``pythons``: ``NamespaceStack`` ensure/observe/destroy, the JSON CLI's up, the
engine's contracts on the pinned CLI) run
with that interpreter and those dependencies; they import the checkout's copy of the package,
the wheel's own source. Dev only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".infercrane" / "pythons"
PIP = ("-m", "pip", "install", "--quiet", "--disable-pip-version-check")
# What a control plane imports; run outside the source tree, so the wheel is what answers.
IMPORT_CHECK = """
import pathlib, infercrane_pulumi
from infercrane_pulumi.automation import NamespaceStack, PulumiEnvironment
from infercrane_pulumi.config.intents import KubernetesSettings, ReplicaIntent
root = pathlib.Path(infercrane_pulumi.__file__).parent
assert "site-packages" in str(root), root
assert (root / "py.typed").is_file() and sorted(root.glob("schemas/*.json")), root
print(f"public API imported from {root}")
"""


@dataclass(frozen=True)
class Variant:
    name: str
    python: str  # major.minor
    lowest: bool  # direct runtime dependencies at their lower bounds, else constraints.txt
    pipx: bool = False  # also `pipx install` the wheel with this Python
    suites: bool = True  # the unit tests and the conformance subset, else the wheel's checks only


VARIANTS = (
    # make test's own virtualenv runs every suite on 3.11 (an editable install): the wheel only.
    Variant("3.11", "3.11", lowest=False, suites=False),
    Variant("3.12", "3.12", lowest=False, pipx=True),
    Variant("3.13-lowest", "3.13", lowest=True),
)


def lowest_pins(requirements: Iterable[str]) -> list[str]:
    """``name==lower`` for each requirement (a constraint, so without its extras: an extra's
    packages follow from the version); every one must have a ``>=``."""
    pins = []
    for text in requirements:
        requirement = Requirement(text)
        lower = [spec.version for spec in requirement.specifier if spec.operator == ">="]
        if len(lower) != 1:
            raise ValueError(f"{text}: a runtime requirement needs exactly one >= lower bound")
        pins.append(f"{requirement.name}=={lower[0]}")
    return pins


def interpreter(version: str) -> str | None:
    """An installed ``python<version>`` that runs: the PATH's, else pyenv's (whose shim on PATH
    answers only for the version pyenv has selected); None if there is none."""
    versions = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    on_path = shutil.which(f"python{version}")
    candidates = [on_path] if on_path else []
    candidates += [str(p) for p in sorted(versions.glob(f"{version}.*/bin/python{version}"))][::-1]
    for candidate in candidates:
        if subprocess.run([candidate, "-c", ""], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


def runtime_requirements(pyproject: Path) -> list[str]:
    dependencies: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return dependencies


def _run(argv: Sequence[str], **kwargs: object) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, **kwargs)  # type: ignore[call-overload]


def build(out: Path) -> Path:
    """The wheel and the sdist, from this checkout, with this venv's setuptools (no download)."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)]
    _run(command, stdout=subprocess.DEVNULL)
    [wheel] = out.glob("*.whl")
    [_sdist] = out.glob("*.tar.gz")
    return wheel


def prove(variant: Variant, python: str, wheel: Path, pytest_args: Sequence[str]) -> float:
    """One variant, from a clean virtualenv to its tests; its seconds."""
    started = time.monotonic()
    home = WORK / variant.name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    _run([python, "-m", "venv", str(home / "venv")])
    py = str(home / "venv" / "bin" / "python")
    constraints = ROOT / "constraints.txt"
    if variant.lowest:
        constraints = home / "lowest.txt"
        constraints.write_text(
            "\n".join(lowest_pins(runtime_requirements(ROOT / "pyproject.toml")))
        )
    _run([py, *PIP, "-c", str(constraints), f"{wheel}[test]"])
    with (home / "freeze.txt").open("w") as freeze:
        _run([py, "-m", "pip", "freeze", "--disable-pip-version-check"], stdout=freeze)
    _run([py, "-c", IMPORT_CHECK], cwd=home)
    _run([str(home / "venv" / "bin" / "infercrane-pulumi"), "--version"], cwd=home)
    if variant.pipx:
        pipx_install(python, wheel, constraints, home / "pipx")
    if not variant.suites:
        return time.monotonic() - started
    pytest = [py, "-m", "pytest", "-p", "no:cacheprovider"]
    _run([*pytest, "-q", "tests/unit"], cwd=ROOT)
    # On the pinned Pulumi CLI: the newest one's build may still run (hack/test.sh), and the
    # engine's contracts do not depend on the Python running the driver.
    selection = "pythons and not newest_cli"
    _run([*pytest, "-rs", "-m", selection, "tests/conformance", *pytest_args], cwd=ROOT)
    return time.monotonic() - started


def pipx_install(python: str, wheel: Path, constraints: Path, home: Path) -> None:
    """``pipx install <wheel>`` into a private pipx home, then the command it put on the PATH."""
    environ = {**os.environ, "PIPX_HOME": str(home), "PIPX_BIN_DIR": str(home / "bin")}
    pipx = [sys.executable, "-m", "pipx", "install", "--python", python]
    _run([*pipx, "--pip-args", f"-c {constraints}", str(wheel)], env=environ, cwd=home.parent)
    _run([str(home / "bin" / "infercrane-pulumi"), "--version"], cwd=home.parent)


def versions(freeze: Path, names: Iterable[str]) -> str:
    """``name version`` of each direct dependency as the variant installed it."""
    installed = {
        canonicalize_name(name): version
        for name, _, version in (line.partition("==") for line in freeze.read_text().splitlines())
        if version
    }
    return ", ".join(
        f"{name} {installed.get(canonicalize_name(name), '?')}"
        for name in (Requirement(r).name for r in names)
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infercrane_dev.pythons")
    parser.add_argument("--only", choices=[v.name for v in VARIANTS], action="append")
    parser.add_argument("pytest_args", nargs="*", help="passed to the conformance subset")
    args = parser.parse_args(argv)
    if not os.environ.get("INFERCRANE_TOOLS_BIN"):
        raise SystemExit("pythons: INFERCRANE_TOOLS_BIN is not set (make test-pythons sets it)")
    started = time.monotonic()
    wheel = build(WORK / "dist")
    print(f"pythons: built {wheel.name} and its sdist in {time.monotonic() - started:.0f}s")
    runtime = runtime_requirements(ROOT / "pyproject.toml")
    for variant in VARIANTS:
        if args.only and variant.name not in args.only:
            continue
        python = interpreter(variant.python)
        if python is None:
            missing = f"no python{variant.python} runs here (PATH, then pyenv's versions)"
            if os.environ.get("INFERCRANE_REQUIRE_TOOLS") == "1":
                raise SystemExit(f"pythons: {variant.name}: {missing}")
            print(f"pythons: SKIPPED {variant.name}: {missing}", flush=True)
            continue
        seconds = prove(variant, python, wheel, args.pytest_args)
        installed = versions(WORK / variant.name / "freeze.txt", runtime)
        print(f"pythons: {variant.name} finished in {seconds:.0f}s ({installed})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
