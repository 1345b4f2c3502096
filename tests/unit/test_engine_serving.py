"""The program served from the driver's process: a language runtime on a Unix socket in the
run's private directory, for one run."""

from __future__ import annotations

import asyncio
import contextlib
import stat
import sys
import threading
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pytest
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, resource_pb2, resource_pb2_grpc

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


class _Monitor(resource_pb2_grpc.ResourceMonitorServicer):
    """An engine's resource monitor that registers whatever it is asked to, and supports no
    optional feature."""

    def SupportsFeature(self, request: Any, context: Any) -> Any:
        return resource_pb2.SupportsFeatureResponse(hasSupport=False)

    def RegisterResource(self, request: Any, context: Any) -> Any:
        return resource_pb2.RegisterResourceResponse(urn=f"urn:pulumi:s::p::{request.type}::x")


def test_a_run_still_going_when_serving_ends_is_cancelled_and_its_loop_closed(
    tmp_path: Path,
) -> None:
    """What the engine abandoned mid-run (its API server gone): an output the program waits
    for is never resolved, so the run would wait, its loop open, as long as the driver lives."""
    monitor = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    resource_pb2_grpc.add_ResourceMonitorServicer_to_server(_Monitor(), monitor)
    monitor_address = f"unix:{tmp_path / 'monitor.sock'}"
    monitor.add_insecure_port(monitor_address)
    monitor.start()
    loops: list[asyncio.AbstractEventLoop] = []
    started = threading.Event()

    def program() -> None:
        loops.append(asyncio.get_running_loop())
        pulumi.export("never", pulumi.Output.from_input(loops[0].create_future()))
        started.set()

    def engine(address: str) -> None:
        with grpc.insecure_channel(address) as channel:
            request = language_pb2.RunRequest(
                project="p", stack="s", monitor_address=monitor_address, parallel=1
            )
            with contextlib.suppress(grpc.RpcError):  # the runtime may go first
                language_pb2_grpc.LanguageRuntimeStub(channel).Run(request, timeout=60)

    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    try:
        with serving.serving(program, run) as (_, address, *_):
            asking = threading.Thread(target=engine, args=(address,))
            asking.start()
            assert started.wait(30)
        [loop] = loops
        assert loop.is_closed()  # before serving returned, not whenever the run ends
        asking.join(30)
        assert not asking.is_alive()
    finally:
        monitor.stop(0)
