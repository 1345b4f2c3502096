"""The Pulumi SDK's private names the run path imports, in the shapes it uses them.

These names are no part of the SDK's public API, which is why pyproject caps the SDK at the
minor tested (``pulumi>=3.272.0,<3.273``): before the cap is raised, an SDK that drops or
reshapes one fails here, by name, instead of in a control plane's first run. The program is
served from the driver's process by subclassing the SDK's inline-program runtime
(``pulumi.automation._server.LanguageServer``), on a gRPC server with the SDK's own options
(``pulumi.runtime._grpc_settings``), registered through the SDK's generated gRPC code
(``pulumi.runtime.proto``); it sends no stack trace with the resources it registers, by
replacing ``pulumi.runtime.resource._get_stack_trace`` (``serving``). What the CLI must do with
that runtime is tested against the real engine (``tests/conformance/test_engine_contracts.py``).
"""

from __future__ import annotations

import contextvars
import inspect
from concurrent import futures

import grpc
import pulumi.runtime.resource
from pulumi.automation._server import LanguageServer
from pulumi.runtime import resource
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import language_pb2_grpc, source_pb2

from infercrane_pulumi.automation.engine import serving


def test_the_inline_runtime_is_a_servicer_made_of_one_program_and_runs_it_synchronously() -> None:
    # The run path calls `super().__init__(program)` and wraps `Run`, calling the SDK's on the
    # gRPC worker's thread and closing the event loop it leaves behind once it returns.
    assert issubclass(LanguageServer, language_pb2_grpc.LanguageRuntimeServicer)
    assert list(inspect.signature(LanguageServer.__init__).parameters) == ["self", "program"]
    assert list(inspect.signature(LanguageServer.Run).parameters) == [
        "self",
        "request",
        "context",
    ]
    assert not inspect.iscoroutinefunction(LanguageServer.Run)


def test_the_grpc_options_are_name_value_pairs_a_server_takes() -> None:
    names = [name for name, _ in _GRPC_CHANNEL_OPTIONS]
    # What the SDK serves its own inline programs with: gRPC's 4 MiB message limit lifted.
    assert "grpc.max_receive_message_length" in names
    with futures.ThreadPoolExecutor(max_workers=1) as pool:
        grpc.server(pool, options=_GRPC_CHANNEL_OPTIONS).stop(0)


def test_the_generated_code_registers_a_servicer_on_a_server() -> None:
    register = language_pb2_grpc.add_LanguageRuntimeServicer_to_server
    assert list(inspect.signature(register).parameters) == ["servicer", "server"]


class _Registered:
    """The SDK's registration shape: its stack trace taken in the third ``__init__`` up (the
    base resource, the custom or component resource, the concrete one)."""

    def __init__(self) -> None:
        self.trace = pulumi.runtime.resource._get_stack_trace()


class _Custom(_Registered):
    def __init__(self) -> None:
        super().__init__()


class _Concrete(_Custom):
    def __init__(self) -> None:
        super().__init__()


def test_a_served_run_registers_no_stack_trace_and_other_programs_keep_the_sdk_s() -> None:
    # The SDK looks the function up by its module's name at each registration, so the run path's
    # replacement is the one called; outside a served run it is the SDK's own.
    for register in (resource.register_resource, resource.read_resource):
        assert "_get_stack_trace()" in inspect.getsource(register)
    assert pulumi.runtime.resource._get_stack_trace is serving._stack_trace
    theirs = _Concrete().trace
    assert theirs.frames and theirs.frames[0].pc.uri.endswith("test_sdk_contracts.py")

    def served() -> source_pb2.StackTrace:
        serving._served.set(True)
        return _Concrete().trace

    assert contextvars.copy_context().run(served) == source_pb2.StackTrace()
    assert _Concrete().trace.frames  # the served run's setting stayed in its context
