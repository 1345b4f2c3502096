"""The program, served from the driver's own process to one engine run.

The Pulumi CLI would otherwise start a language host and a fresh interpreter that imports the
program, the SDK and pulumi-kubernetes again on every run: most of a small run's fixed cost
(benchmarks/results/history-until-2026-12.md). The CLI's ``--client`` flag instead points the engine
at a language runtime that is already running, as the Automation API's inline programs do; here
the runtime is this module's own, for exactly one CLI run, made of the SDK's public runtime
(``pulumi.runtime``: ``reset_options``, ``set_all_config``, ``run_in_stack``) and its generated
gRPC code, so that any SDK of major 3 from 3.230 serves it. The SDK keeps each run's state in
context variables, so runs of several stacks may be served at once.

It listens on a Unix socket in the run's private directory (0700), not on a loopback port: a
port answers every process of the host, and a ``Run`` asked by any of them would run the program
(its preflight reads the cluster, its engine calls apply) for whoever asked. The socket answers
only its own user, that is, the engine the run started (and root).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import platform
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pulumi
import pulumi.runtime
import pulumi.runtime.resource
from pulumi.runtime.proto import language_pb2, language_pb2_grpc, plugin_pb2, source_pb2

from infercrane_pulumi import private_dirs

SOCKET = "program.sock"  # in the run's private directory
MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path (sun_path, its NUL aside)
SHORT_BASE = Path("/tmp")  # where a socket goes when the run's directory is too deep
_SHORT = "infercrane-socket-"
# gRPC's 4 MiB message cap lifted, as the SDK serves its own programs: the engine hands the
# whole configuration in one message, and a registration answers with a resource's whole
# state. A queued request may wait for a busy program's event loop far longer than gRPC's
# default 30 s before it is cancelled (failing the run).
GRPC_OPTIONS = (
    ("grpc.max_receive_message_length", 400 * 1024 * 1024),
    ("grpc.server_max_unrequested_time_in_server", 30 * 60),
)
ENDING_SECONDS = 5.0  # what a run's tasks get to end in, once cancelled

# With every resource it registers, the SDK sends the Python stack that registered it, and the
# engine keeps it in the resource's state: here about 25 frames (the program's, the SDK's,
# asyncio's, the runtime's) as paths of the driver's machine, 2.5 KB per resource, a quarter of
# an intent's state, read, written and kept in history by every run. A served program
# registers every resource from the same two lines of ``program.py``, so the stack tells a
# reader nothing: served runs send none. Other programs in the process keep the SDK's. The
# function is the SDK's private name (3.230 to 3.272 have it): an SDK without it registers
# with whatever stack it sends, which costs state, not correctness.
_served = contextvars.ContextVar("infercrane_served", default=False)
_sdk_stack_trace: Callable[[], source_pb2.StackTrace] | None = getattr(
    pulumi.runtime.resource, "_get_stack_trace", None
)


def _stack_trace() -> source_pb2.StackTrace:
    assert _sdk_stack_trace is not None  # only installed over the SDK's own
    return source_pb2.StackTrace() if _served.get() else _sdk_stack_trace()


if _sdk_stack_trace is not None:
    pulumi.runtime.resource._get_stack_trace = _stack_trace


class _Runtime(language_pb2_grpc.LanguageRuntimeServicer):
    """The language runtime of one served program: the engine's ``Run`` runs it in an event
    loop of its own, in a copy of the context (several runs at once), and the loop is closed
    with whatever the program left in it however the run ended, even when the engine went
    away mid-run (an API server gone, a run stopped): otherwise two descriptors and the run's
    objects stay, per such run, for as long as the driver lives (seen in
    ``test_cli_and_faults``).

    A run the engine abandoned may never end by itself: an output whose registration the
    engine never answered stays pending, and the SDK waits for every output (seen beside a
    busy CPU: the loop waited, its thread with it, until the driver's end). So when serving
    ends, its engine is gone and every run still going is cancelled (``abandon``)."""

    def __init__(self, program: Callable[[], None]) -> None:
        self.program = program
        self._lock = threading.Lock()
        self._loops: set[asyncio.AbstractEventLoop] = set()
        self._abandoned = False

    def abandon(self) -> None:
        """Cancel every run still going, and any run asked for from now on. The programs served
        register synchronously, so a cancellation lands in the SDK's own waits (for the
        registrations, the outputs, the engine's shutdown), which end on it."""
        with self._lock:
            self._abandoned = True
            for loop in self._loops:
                loop.call_soon_threadsafe(_cancel_all, loop)

    def _started(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether ``loop`` may run the program (serving has not ended)."""
        with self._lock:
            if not self._abandoned:
                self._loops.add(loop)
            return not self._abandoned

    def _ended(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close ``loop`` with whatever the program left in it, each task cancelled first."""
        with self._lock:  # from here on ``abandon`` leaves it alone
            self._loops.discard(loop)
        _cancel_all(loop)
        # Bounded: the SDK takes a cancellation in the program's own code as its failure, then
        # waits for its outputs again. A task still pending is dropped with the loop.
        if pending := asyncio.all_tasks(loop):
            # A cancellation ``abandon`` asked for just before may end the wait itself.
            with contextlib.suppress(asyncio.CancelledError):
                loop.run_until_complete(asyncio.wait(pending, timeout=ENDING_SECONDS))
        loop.close()

    def GetRequiredPlugins(self, request: Any, context: Any) -> Any:
        return language_pb2.GetRequiredPluginsResponse()  # the engine's own default ones

    def GetRequiredPackages(self, request: Any, context: Any) -> Any:
        return language_pb2.GetRequiredPackagesResponse()

    def GetPluginInfo(self, request: Any, context: Any) -> Any:
        return plugin_pb2.PluginInfo()

    def About(self, request: Any, context: Any) -> Any:
        return language_pb2.AboutResponse(
            executable=sys.executable, version=platform.python_version()
        )

    def Run(self, request: Any, context: Any) -> Any:
        return contextvars.copy_context().run(self._run, request)

    def _run(self, request: Any) -> Any:
        pulumi.runtime.reset_options(
            project=request.project,
            monitor_address=request.monitor_address,
            engine_address=request.args[0] if request.args else "",
            stack=request.stack,
            parallel=request.parallel,
            preview=request.dryRun,
            organization=request.organization or "organization",
        )
        if request.config:
            secret = list(request.configSecretKeys) or None
            pulumi.runtime.set_all_config(dict(request.config), secret)
        _served.set(True)  # in this run's context only
        # A task the engine's end left unobserved says so on asyncio's logger, to nobody.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
        loop = asyncio.new_event_loop()
        # Registrations wait on the engine in the loop's executor: room for the engine's
        # parallelism several times over, as the SDK's own hosts give it.
        loop.set_default_executor(
            futures.ThreadPoolExecutor(max_workers=max(request.parallel, 1) * 4)
        )
        try:
            if self._started(loop):
                loop.run_until_complete(pulumi.runtime.run_in_stack(self.program))
            return language_pb2.RunResponse()
        except pulumi.RunError as error:
            return _failed(str(error))
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNAVAILABLE:  # the engine is gone: nobody to tell
                return language_pb2.RunResponse()
            return _failed(f"RPC error: {error.details()}")
        except BaseException as error:  # every failure is the run's error, as the engine shows it
            if self._abandoned:  # cancelled: the engine that asked is gone, nobody to tell
                return language_pb2.RunResponse()
            return _failed(f"the served program failed: {error}\n{traceback.format_exc()}")
        finally:
            self._ended(loop)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


def _failed(message: str) -> Any:
    """The run's error, also logged to the engine, which shows it as the run's diagnostic."""
    pulumi.log.error(message)
    return language_pb2.RunResponse(error=message)


@contextlib.contextmanager
def serving(program: Callable[[], None], directory: Path) -> Iterator[tuple[str, ...]]:
    """Serve ``program`` until the block ends, on a socket in ``directory`` (private to this
    user: the run's own); yields the CLI flags that run it."""
    pool = futures.ThreadPoolExecutor(max_workers=4)
    server = grpc.server(pool, options=GRPC_OPTIONS)
    runtime = _Runtime(program)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(runtime, server)
    socket = directory.resolve() / SOCKET
    own = None
    if len(bytes(socket)) > MAX_SOCKET_PATH:
        # A socket's path holds at most 107 bytes (sun_path), and a deep TMPDIR's run directory
        # more: then the socket gets a private directory of its own in /tmp.
        own = private_dirs.made(_SHORT, SHORT_BASE)
        socket = own / SOCKET
    address = f"unix:{socket}"
    server.add_insecure_port(address)
    server.start()
    try:
        yield ("--client", address, "--exec-kind", "auto.inline")
    finally:
        server.stop(0)
        # The engine's process has ended: a run still going was abandoned, and ends now,
        # its loop closed, before the run's caller goes on (``_Runtime``).
        runtime.abandon()
        pool.shutdown(wait=True)
        if own is not None:
            private_dirs.removed(own)
