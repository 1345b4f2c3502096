"""What the run path takes from the Pulumi SDK to serve its program, in the shapes it uses.

The program is served from the driver's process by a language runtime of the run path's own
(``automation.engine.serving``), made of the SDK's public runtime (``pulumi.runtime``'s
``reset_options``, ``set_all_config`` and ``run_in_stack``, each in its ``__all__``) and its
generated gRPC code (``pulumi.runtime.proto``). One private name is used where the SDK has it:
served runs send no stack trace with the resources they register, by replacing
``pulumi.runtime.resource._get_stack_trace``; an SDK without it costs state, not correctness.
pyproject allows every SDK of major 3 from 3.230.0: an SDK that reshapes one of these fails
here, by name, on the oldest (``make test-pythons``' lowest variant) or the newest SDK, instead
of in a control plane's first run. What the CLI must do with that runtime is tested against
the real engine (``tests/conformance/test_engine_contracts.py``).
"""

from __future__ import annotations

import contextvars
import inspect
from concurrent import futures

import grpc
import pulumi.runtime
import pulumi.runtime.resource
from pulumi.runtime import resource
from pulumi.runtime.proto import language_pb2_grpc, source_pb2

from infercrane_pulumi.automation.engine import serving


def test_the_runtime_the_program_is_served_with_is_the_sdk_s_public_one() -> None:
    public = set(pulumi.runtime.__all__)
    assert {"reset_options", "set_all_config", "run_in_stack"} <= public
    # The keywords and positions `serving._Runtime` passes.
    assert {
        "project",
        "monitor_address",
        "engine_address",
        "stack",
        "parallel",
        "preview",
        "organization",
    } <= set(inspect.signature(pulumi.runtime.reset_options).parameters)
    assert len(inspect.signature(pulumi.runtime.set_all_config).parameters) >= 2
    assert inspect.iscoroutinefunction(pulumi.runtime.run_in_stack)


def test_the_served_runtime_answers_every_call_the_engine_makes_of_a_client_runtime() -> None:
    asked = ("Run", "GetRequiredPlugins", "GetRequiredPackages", "GetPluginInfo", "About")
    servicer = language_pb2_grpc.LanguageRuntimeServicer
    # Each is the SDK's generated method, overridden (the generated one answers UNIMPLEMENTED).
    assert [
        name for name in asked if getattr(serving._Runtime, name) is getattr(servicer, name)
    ] == []
    assert issubclass(serving._Runtime, servicer)


def test_the_grpc_options_are_name_value_pairs_a_server_takes() -> None:
    with futures.ThreadPoolExecutor(max_workers=1) as pool:
        grpc.server(pool, options=serving.GRPC_OPTIONS).stop(0)


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
