"""The Pulumi SDK's private names the run path imports, in the shapes it uses them.

These names are no part of the SDK's public API, which is why pyproject caps the SDK at the
minor tested (``pulumi>=3.272.0,<3.273``): before the cap is raised, an SDK that drops or
reshapes one fails here, by name, instead of in a control plane's first run. The program is
served from the driver's process by subclassing the SDK's inline-program runtime
(``pulumi.automation._server.LanguageServer``), on a gRPC server with the SDK's own options
(``pulumi.runtime._grpc_settings``), registered through the SDK's generated gRPC code
(``pulumi.runtime.proto``). What the CLI must do with that runtime is tested against the real
engine (``tests/conformance/test_engine_contracts.py``).
"""

from __future__ import annotations

import inspect
from concurrent import futures

import grpc
from pulumi.automation._server import LanguageServer
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import language_pb2_grpc


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
