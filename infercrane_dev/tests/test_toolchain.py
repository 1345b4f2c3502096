"""Locating etcd / kube-apiserver / kube-controller-manager."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from infercrane_dev import toolchain
from infercrane_dev.toolchain import (
    TOOLS_BIN_ENV,
    BinaryNotFoundError,
    find_binary,
)


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_env_var_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in toolchain.CONTROL_PLANE_BINARIES:
        _exe(tmp_path / "bin" / name)
    monkeypatch.setenv(TOOLS_BIN_ENV, str(tmp_path / "bin"))
    found = {n: find_binary(n, root=tmp_path / "no-repo") for n in toolchain.CONTROL_PLANE_BINARIES}
    assert found == {n: tmp_path / "bin" / n for n in toolchain.CONTROL_PLANE_BINARIES}


def test_missing_binary_error_names_env_var_and_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOOLS_BIN_ENV, str(tmp_path / "empty"))
    with pytest.raises(BinaryNotFoundError) as info:
        find_binary("kube-apiserver", root=tmp_path)
    message = str(info.value)
    assert TOOLS_BIN_ENV in message
    assert "kube-apiserver" in message
    assert "hack/tools/build.sh" in message
    assert str(tmp_path / "empty") in message


def test_non_executable_is_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "etcd").write_text("not executable")
    monkeypatch.setenv(TOOLS_BIN_ENV, str(tmp_path))
    with pytest.raises(BinaryNotFoundError):
        find_binary("etcd", root=tmp_path)


def test_build_script_bin_dir_is_used_without_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOOLS_BIN_ENV, raising=False)
    bin_dir = tmp_path / "cache" / "v1.36.0" / "bin"
    _exe(bin_dir / "etcd")
    script = tmp_path / "repo" / "hack" / "tools" / "build.sh"
    script.parent.mkdir(parents=True)
    script.write_text(f'#!/bin/bash\n[ "$1" = --bin-dir ] && echo "{bin_dir}"\n')
    assert find_binary("etcd", root=tmp_path / "repo") == bin_dir / "etcd"


def test_cache_glob_is_used_while_script_is_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TOOLS_BIN_ENV, raising=False)
    monkeypatch.setattr(toolchain, "_CACHE_GLOB_ROOT", tmp_path / "tools")
    newer = _exe(tmp_path / "tools" / "0aaa" / "bin" / "etcd")
    older = _exe(tmp_path / "tools" / "ffff" / "bin" / "etcd")
    os.utime(newer.parent, (2_000_000_000, 2_000_000_000))
    os.utime(older.parent, (1_000_000_000, 1_000_000_000))
    assert find_binary("etcd", root=tmp_path / "repo-without-script") == newer


def test_nothing_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TOOLS_BIN_ENV, raising=False)
    monkeypatch.setattr(toolchain, "_CACHE_GLOB_ROOT", tmp_path / "none")
    with pytest.raises(BinaryNotFoundError, match=TOOLS_BIN_ENV):
        find_binary("etcd", root=tmp_path)
