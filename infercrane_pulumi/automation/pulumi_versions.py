"""Which Pulumi the program works with, and whether this machine has it (``doctor``'s rows).

The SDK drives a CLI at least as new as itself within its major version: Pulumi keeps a newer
CLI working with an older SDK, not the reverse. The program asks for one pulumi-kubernetes
plugin version, ``components.PLUGIN_VERSION``, whatever SDK of its supported range is
installed (an SDK would otherwise ask for its own version), so exactly that plugin must be
installed: runs never download one (``PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION``).
hack/tools builds both; CI runs CLI 3.274.0 with SDK 3.272.0 and plugin 4.25.0.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from infercrane_pulumi.cluster.doctor import DoctorRow
from infercrane_pulumi.program.components import PLUGIN_VERSION

_RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
PLUGIN_FILE = "pulumi-resource-kubernetes"


def release(text: str) -> tuple[int, int, int] | None:
    """``v3.274.0`` (or ``3.274.0-dev``) as numbers; None if it is no version."""
    found = _RELEASE.match(text.strip())
    return None if found is None else (int(found[1]), int(found[2]), int(found[3]))


def sdk_version() -> str:
    return importlib.metadata.version("pulumi")


def supported_cli(sdk: str) -> str:
    """The CLI versions an SDK supports, as ``docs/how-to/install.md`` and ``doctor`` state them."""
    parsed = release(sdk)
    assert parsed is not None, sdk
    return f">= {sdk}, < {parsed[0] + 1}"


def cli_row(found: str | None, sdk: str) -> DoctorRow:
    """Whether the CLI a run would use is one this SDK supports."""
    wanted = f"this SDK ({sdk}) needs a CLI {supported_cli(sdk)}"
    if found is None:
        return DoctorRow(
            "fail", "pulumi:cli", f"none found ($INFERCRANE_TOOLS_BIN, PATH); {wanted}"
        )
    version, lowest = release(found), release(sdk)
    assert lowest is not None, sdk
    if version is not None and lowest <= version < (lowest[0] + 1, 0, 0):
        return DoctorRow("ok", "pulumi:cli", f"{found.strip()}; SDK {sdk}")
    return DoctorRow("fail", "pulumi:cli", f"{found.strip()} is outside the range: {wanted}")


def plugin_row(installed: bool, pulumi_home: Path) -> DoctorRow:
    if installed:
        return DoctorRow("ok", "pulumi:plugin", f"kubernetes {PLUGIN_VERSION} in {pulumi_home}")
    return DoctorRow("fail", "pulumi:plugin", plugin_missing(pulumi_home))


def plugin_binary(pulumi_home: Path) -> Path:
    """Where a run's engine takes the plugin from: it never downloads one, and never takes a
    same-named binary on PATH (``PULUMI_IGNORE_AMBIENT_PLUGINS``)."""
    return pulumi_home / "plugins" / f"resource-kubernetes-v{PLUGIN_VERSION}" / PLUGIN_FILE


def plugin_missing(pulumi_home: Path) -> str:
    return (
        f"{PLUGIN_FILE} {PLUGIN_VERSION}: not installed in {pulumi_home / 'plugins'} and runs "
        f"never download one: pulumi plugin install resource kubernetes {PLUGIN_VERSION} (with "
        f"--file <tools bin>/{PLUGIN_FILE} for the one hack/tools/build.sh builds)"
    )


def cli_missing(bin_dir: Path | None, path: str) -> str | None:
    """Why no Pulumi CLI can run (None: one can): ``bin_dir`` (``--tools-bin``) without it,
    or none on ``path``."""
    if bin_dir is not None:
        # The SDK runs <root>/bin/pulumi: a directory of another name would not be searched.
        if bin_dir.name == "bin" and (bin_dir / "pulumi").is_file():
            return None
        return (
            f"tools bin {bin_dir} (--tools-bin, $INFERCRANE_TOOLS_BIN): not a directory named "
            "bin holding the pulumi CLI (hack/tools/build.sh --bin-dir prints one)"
        )
    if shutil.which("pulumi", path=path) is not None:
        return None
    return (
        "pulumi CLI: not on PATH, and no --tools-bin or $INFERCRANE_TOOLS_BIN: install a CLI "
        f"{supported_cli(sdk_version())}, or build the pinned one with hack/tools/build.sh and "
        "pass its --bin-dir as --tools-bin"
    )


@dataclass(frozen=True)
class Installed:
    cli: str | None  # what `pulumi version` printed; None: no CLI, or it did not answer
    pulumi_home: Path
    plugin: bool


def installed(bin_dir: Path | None, pulumi_home: Path, path: str) -> Installed:
    """The CLI and plugin a run would use: ``bin_dir``'s ``pulumi`` else the one on ``path``
    (as the run path picks it), the plugin in ``pulumi_home``."""
    executable = str(bin_dir / "pulumi") if bin_dir else shutil.which("pulumi", path=path)
    cli = None
    if executable is not None and Path(executable).is_file():
        try:
            answered = subprocess.run(
                [executable, "version"],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
                env={"PULUMI_SKIP_UPDATE_CHECK": "true", "PATH": path},
            )
            cli = answered.stdout.strip() if answered.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):  # reported as no CLI
            cli = None
    return Installed(cli, pulumi_home, plugin_binary(pulumi_home).is_file())


def rows(found: Installed) -> list[DoctorRow]:
    return [cli_row(found.cli, sdk_version()), plugin_row(found.plugin, found.pulumi_home)]
