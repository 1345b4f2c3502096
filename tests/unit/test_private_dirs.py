"""Files that must not outlive their process (a kubeconfig's key data) stay in a private
directory, which the process removes, and which the next process removes if it was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from infercrane_pulumi import private_dirs
from infercrane_pulumi.cluster import client

# Run in a child: connect with kubeconfig contents holding key data, say where the library
# wrote the key, then wait to be killed or told to end.
CONNECTING = textwrap.dedent(
    """
    import sys
    from infercrane_pulumi.cluster import client
    from infercrane_pulumi.config.rules import parse_stack_config
    from tests.unit import samples

    settings = parse_stack_config(
        samples.kubernetes(kubeconfig=samples.KUBECONFIG_CONTENTS), []
    ).kubernetes
    client.connect(settings)
    print(next(client._key_files().glob("tmp*")), flush=True)
    sys.stdin.readline()
    """
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own temporary directory, for this process and the children it starts."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _connecting(tmp: Path) -> tuple[subprocess.Popen[str], Path]:
    child = subprocess.Popen(
        [sys.executable, "-c", CONNECTING],
        cwd=ROOT,
        env=os.environ | {"TMPDIR": str(tmp)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_the_clients_key_files_are_private_and_removed_however_their_process_ends(
    tmp: Path,
) -> None:
    ended, key = _connecting(tmp)
    assert key.read_text() == "secret-key"
    assert key.parent.parent == tmp and key.parent.name.startswith(client.KEY_FILES_PREFIX)
    assert key.parent.stat().st_mode & 0o777 == 0o700
    ended.communicate("\n")  # it exits: its directory goes with it
    assert not key.parent.exists()
    killed, left = _connecting(tmp)
    living, kept = _connecting(tmp)
    killed.send_signal(signal.SIGKILL)
    killed.communicate()  # its pipes closed
    # The next process to connect removes what the killed one left, not what one living holds.
    assert private_dirs.sweep(client.KEY_FILES_PREFIX) == [left.parent]
    assert kept.read_text() == "secret-key"
    living.communicate("\n")
    assert list(tmp.iterdir()) == []


def test_a_sweep_leaves_what_it_did_not_make(tmp: Path) -> None:
    theirs = tmp / "infercrane-run-theirs"
    theirs.mkdir()
    mine = private_dirs.made("infercrane-run-")
    assert private_dirs.sweep("infercrane-run-") == []
    assert sorted(tmp.iterdir()) == sorted([theirs, mine])
    assert sorted(p.name for p in mine.iterdir()) == [private_dirs.LOCK]
    private_dirs.removed(mine)
    assert list(tmp.iterdir()) == [theirs]
