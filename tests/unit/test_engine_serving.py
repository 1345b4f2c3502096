"""The program served from the driver's process: a language runtime on a Unix socket in the
run's private directory, for one run."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import grpc
import pytest
from pulumi.runtime.proto import language_pb2, language_pb2_grpc

from infercrane_pulumi.automation.engine import serving


def about(address: str) -> str:
    """The executable the runtime at ``address`` says it runs."""
    with grpc.insecure_channel(address) as channel:
        stub = language_pb2_grpc.LanguageRuntimeStub(channel)
        return str(stub.About(language_pb2.AboutRequest(), timeout=5).executable)


def _served(directory: Path) -> str:
    with serving.serving(lambda: None, directory) as flags:
        flag, address, *rest = flags
        assert (flag, rest) == ("--client", ["--exec-kind", "auto.inline"])
        socket = Path(address.removeprefix("unix:"))
        # Only this user reaches it: no port any process of the host could ask a run of.
        assert stat.S_ISSOCK(socket.stat().st_mode)
        assert socket.parent.stat().st_mode & 0o777 == 0o700
        assert about(address) == sys.executable  # this process serves it
    with pytest.raises(grpc.RpcError) as gone:
        about(address)
    assert gone.value.code() == grpc.StatusCode.UNAVAILABLE
    return address


def test_the_runtime_answers_on_a_private_socket_while_the_block_runs_and_never_after(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    assert _served(run) == f"unix:{run / serving.SOCKET}"


def test_a_run_directory_too_deep_for_a_socket_gets_a_short_private_one(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir(mode=0o700)
    address = _served(deep)
    assert address.startswith(f"unix:{serving.SHORT_BASE}/infercrane-socket-")
    assert not Path(address.removeprefix("unix:")).parent.exists()  # removed with the run
