"""Which Pulumi the program pairs with, and what doctor says about this machine's."""

from __future__ import annotations

import stat
from pathlib import Path

from infercrane_pulumi.automation import pulumi_versions
from infercrane_pulumi.cli import entry
from infercrane_pulumi.cluster.doctor import DoctorRow
from infercrane_pulumi.program.components import PLUGIN_VERSION

NEEDS = "this SDK (3.272.0) needs a CLI >= 3.272.0, < 4"


def test_the_cli_must_be_at_least_the_sdk_and_of_its_major() -> None:
    found = [None, "v3.271.0", "v3.272.0", "v3.274.0", "v3.999.1-dev.0", "v4.0.0", "garbage"]
    assert [pulumi_versions.cli_row(cli, "3.272.0") for cli in found] == [
        DoctorRow("fail", "pulumi:cli", f"none found ($INFERCRANE_TOOLS_BIN, PATH); {NEEDS}"),
        DoctorRow("fail", "pulumi:cli", f"v3.271.0 is outside the range: {NEEDS}"),
        DoctorRow("ok", "pulumi:cli", "v3.272.0; SDK 3.272.0"),
        DoctorRow("ok", "pulumi:cli", "v3.274.0; SDK 3.272.0"),
        DoctorRow("ok", "pulumi:cli", "v3.999.1-dev.0; SDK 3.272.0"),
        DoctorRow("fail", "pulumi:cli", f"v4.0.0 is outside the range: {NEEDS}"),
        DoctorRow("fail", "pulumi:cli", f"garbage is outside the range: {NEEDS}"),
    ]


def fake_cli(directory: Path, answer: str) -> Path:
    """A `pulumi` that answers `pulumi version` as a real one does (a process on PATH)."""
    directory.mkdir(parents=True)
    script = directory / "pulumi"
    script.write_text(f'#!/bin/sh\n[ "$1" = version ] && echo {answer}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return directory


def test_doctor_finds_the_cli_a_run_would_use_and_the_plugin_in_pulumi_home(
    tmp_path: Path,
) -> None:
    # The lowest CLI the installed SDK drives: in range whichever SDK of pyproject's is installed
    # (a fixed v3.274.0 is too old for SDK 3.275.0 and later).
    version = f"v{pulumi_versions.sdk_version()}"
    tools, home = fake_cli(tmp_path / "bin", version), tmp_path / "home"
    missing = pulumi_versions.installed(tools, home, "/usr/bin")
    assert missing == pulumi_versions.Installed(version, home, plugin=False)
    plugin = home / "plugins" / f"resource-kubernetes-v{PLUGIN_VERSION}"
    plugin.mkdir(parents=True)
    (plugin / "pulumi-resource-kubernetes").write_bytes(b"")
    assert pulumi_versions.rows(pulumi_versions.installed(tools, home, "/usr/bin")) == [
        DoctorRow("ok", "pulumi:cli", f"{version}; SDK {pulumi_versions.sdk_version()}"),
        DoctorRow("ok", "pulumi:plugin", f"kubernetes {PLUGIN_VERSION} in {home}"),
    ]
    assert pulumi_versions.rows(missing)[1] == DoctorRow(
        "fail",
        "pulumi:plugin",
        f"pulumi-resource-kubernetes {PLUGIN_VERSION}: not installed in {home}/plugins and runs "
        f"never download one: pulumi plugin install resource kubernetes {PLUGIN_VERSION} (with "
        "--file <tools bin>/pulumi-resource-kubernetes for the one hack/tools/build.sh builds)",
    )
    # Without a tools directory, the one on PATH; none at all is a row, not a crash.
    on_path = fake_cli(tmp_path / "path", "v3.100.0")
    assert pulumi_versions.installed(None, home, str(on_path)).cli == "v3.100.0"
    assert pulumi_versions.installed(None, home, str(tmp_path / "empty")).cli is None


def test_version_names_ours_the_sdk_the_cli_range_and_the_plugin() -> None:
    assert entry.version_line() == (
        f"infercrane-pulumi 0.1.0 (pulumi SDK {pulumi_versions.sdk_version()}, CLI >= "
        f"{pulumi_versions.sdk_version()}, < 4; pulumi-kubernetes plugin {PLUGIN_VERSION})"
    )


def test_a_missing_cli_is_named_with_where_it_was_looked_for_and_how_to_get_it(
    tmp_path: Path,
) -> None:
    tools = fake_cli(tmp_path / "tools" / "bin", "v3.274.0")
    assert pulumi_versions.cli_missing(tools, "") is None
    assert pulumi_versions.cli_missing(None, str(tools)) is None
    assert pulumi_versions.cli_missing(tmp_path / "empty" / "bin", str(tools)) == (
        f"tools bin {tmp_path}/empty/bin (--tools-bin, $INFERCRANE_TOOLS_BIN): not a directory "
        "named bin holding the pulumi CLI (hack/tools/build.sh --bin-dir prints one)"
    )
    assert pulumi_versions.cli_missing(None, str(tmp_path / "empty")) == (
        "pulumi CLI: not on PATH, and no --tools-bin or $INFERCRANE_TOOLS_BIN: install a CLI "
        f"{pulumi_versions.supported_cli(pulumi_versions.sdk_version())}, or build the pinned "
        "one with hack/tools/build.sh and pass its --bin-dir as --tools-bin"
    )
