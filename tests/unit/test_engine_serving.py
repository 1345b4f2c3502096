"""The program served from the driver's process: a language runtime on a Unix socket in the
run's private directory, for one run."""

from __future__ import annotations

import asyncio
import contextlib
import stat
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent import futures
from pathlib import Path
from typing import Any, Literal, get_args

import grpc
import pulumi
import pytest
from google.protobuf import empty_pb2
from hypothesis import given, settings
from hypothesis import strategies as st
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


Answer = Literal["registered", "never", "gone", "refused"]
ANSWERS: tuple[Answer, ...] = get_args(Answer)


class _Monitor(resource_pb2_grpc.ResourceMonitorServicer):
    """An engine's resource monitor that supports no optional feature and answers each
    registration as ``answers`` say, in turn (then registers): ``never`` until ``released``,
    ``gone`` as an engine that went away, ``refused`` as an engine's error."""

    def __init__(self, answers: Sequence[Answer], released: threading.Event) -> None:
        self._answers = iter(answers)
        self._lock = threading.Lock()
        self._released = released

    def SupportsFeature(self, request: Any, context: Any) -> Any:
        return resource_pb2.SupportsFeatureResponse(hasSupport=False)

    def GetDeploymentInfo(self, request: Any, context: Any) -> Any:
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "an older engine")

    def RegisterResource(self, request: Any, context: Any) -> Any:
        with self._lock:
            answer = next(self._answers, "registered")
        if answer == "never":
            self._released.wait()
        if answer in ("never", "gone"):
            context.abort(grpc.StatusCode.UNAVAILABLE, "the engine is gone")
        if answer == "refused":
            context.abort(grpc.StatusCode.INTERNAL, "the engine refused it")
        return resource_pb2.RegisterResourceResponse(urn=f"urn:pulumi:s::p::{request.type}::x")

    def RegisterResourceOutputs(self, request: Any, context: Any) -> Any:
        return empty_pb2.Empty()


@settings(deadline=None, max_examples=25)  # a loaded machine's pause is no failure
@given(
    answers=st.lists(st.sampled_from(ANSWERS), max_size=4),
    components=st.integers(0, 3),
    pending=st.booleans(),  # an output the program waits for is never resolved
    engine_waits=st.sampled_from([0.0, 0.05, 0.5]),  # for the run's answer, before it ends
)
def test_no_served_run_outlives_its_serving(
    answers: list[Answer], components: int, pending: bool, engine_waits: float
) -> None:
    """Whatever the engine answers, and whenever it goes away (mid-run too: an API server
    gone, a run stopped), every run served is over and its loop closed when serving returns:
    a run left waiting would keep its loop open as long as the driver lives (seen in
    ``test_cli_and_faults``, beside a busy CPU)."""
    loops: list[asyncio.AbstractEventLoop] = []
    started = threading.Event()
    released = threading.Event()

    def program() -> None:
        loops.append(asyncio.get_running_loop())
        for index in range(components):
            pulumi.ComponentResource("t:index:C", f"c{index}")
        if pending:
            pulumi.export("never", pulumi.Output.from_input(loops[0].create_future()))
        started.set()

    monitor = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    resource_pb2_grpc.add_ResourceMonitorServicer_to_server(_Monitor(answers, released), monitor)
    with tempfile.TemporaryDirectory() as scratch:
        monitor_address = f"unix:{scratch}/monitor.sock"
        monitor.add_insecure_port(monitor_address)
        monitor.start()
        run = Path(scratch, "run")
        run.mkdir(mode=0o700)
        try:
            with (
                serving.serving(program, run) as (_, address, *_),
                grpc.insecure_channel(address) as channel,
            ):
                request = language_pb2.RunRequest(
                    project="p", stack="s", monitor_address=monitor_address, parallel=1
                )
                call = language_pb2_grpc.LanguageRuntimeStub(channel).Run.future(request)
                assert started.wait(30)
                with contextlib.suppress(grpc.FutureTimeoutError, grpc.RpcError):
                    call.result(timeout=engine_waits)
                call.cancel()  # the engine's process ends
            [loop] = loops
            assert loop.is_closed()
        finally:
            released.set()
            monitor.stop(0)
