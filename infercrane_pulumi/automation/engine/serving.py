"""The program, served from the driver's own process to one engine run.

The Pulumi CLI would otherwise start a language host and a fresh interpreter that imports the
program, the SDK and pulumi-kubernetes again on every run: most of a small run's fixed cost
(benchmarks/results/history-until-2026-12.md). The CLI's ``--client`` flag instead points the engine
at a language runtime that is already running; this is the Automation API's own inline-program
runtime (``pulumi.automation._server``, which ``Stack.up`` serves the same way), here for exactly
one CLI run. The SDK keeps each run's state in context variables, so runs of several stacks may
be served at once.

It listens on a Unix socket in the run's private directory (0700), not on a loopback port: a
port answers every process of the host, and a ``Run`` asked by any of them would run the program
(its preflight reads the cluster, its engine calls apply) for whoever asked. The socket answers
only its own user, that is, the engine the run started (and root).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pulumi.runtime.resource
from pulumi.automation._server import LanguageServer
from pulumi.runtime._grpc_settings import _GRPC_CHANNEL_OPTIONS
from pulumi.runtime.proto import language_pb2_grpc, source_pb2

from infercrane_pulumi import private_dirs

SOCKET = "program.sock"  # in the run's private directory
MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path (sun_path, its NUL aside)
SHORT_BASE = Path("/tmp")  # where a socket goes when the run's directory is too deep
_SHORT = "infercrane-socket-"

# With every resource it registers, the SDK sends the Python stack that registered it, and the
# engine keeps it in the resource's state: here about 25 frames (the program's, the SDK's,
# asyncio's, the runtime's) as paths of the driver's machine, 2.5 KB per resource, a quarter of
# an intent's state, read, written and kept in history by every run. A served program
# registers every resource from the same two lines of ``program.py``, so the stack tells a
# reader nothing: served runs send none. Other programs in the process keep the SDK's.
_served = contextvars.ContextVar("infercrane_served", default=False)
_sdk_stack_trace = pulumi.runtime.resource._get_stack_trace


def _stack_trace() -> source_pb2.StackTrace:
    return source_pb2.StackTrace() if _served.get() else _sdk_stack_trace()


pulumi.runtime.resource._get_stack_trace = _stack_trace


class _Runtime(LanguageServer):
    """The SDK's runtime, but every run's event loop is closed however the run ended.

    When the engine goes away mid-run (an API server gone, a run stopped), the SDK's own
    cleanup stops at the first error of a cancelled task and leaves the loop open with the
    program's tasks in it: two descriptors and the run's objects, per such run, for as long as
    the driver lives (seen in ``test_cli_and_faults``). The leftover tasks are cancelled here
    instead; whatever they raise has no engine left to report to."""

    def __init__(self, program: Callable[[], None]) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

        def in_its_loop() -> None:
            self.loops.append(asyncio.get_running_loop())
            _served.set(True)  # in this run's context only
            program()

        super().__init__(in_its_loop)

    def Run(self, request: Any, context: Any) -> Any:
        try:
            return super().Run(request, context)  # type: ignore[no-untyped-call]
        finally:
            for loop in self.loops:
                if loop.is_closed() or loop.is_running():
                    continue
                for task in asyncio.all_tasks(loop):
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        loop.run_until_complete(task)
                loop.close()


@contextlib.contextmanager
def serving(program: Callable[[], None], directory: Path) -> Iterator[tuple[str, ...]]:
    """Serve ``program`` until the block ends, on a socket in ``directory`` (private to this
    user: the run's own); yields the CLI flags that run it."""
    pool = futures.ThreadPoolExecutor(max_workers=4)
    server = grpc.server(pool, options=_GRPC_CHANNEL_OPTIONS)
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(_Runtime(program), server)
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
        # Not waited for: a run the engine abandoned ends on its own thread (above).
        pool.shutdown(wait=False)
        if own is not None:
            private_dirs.removed(own)
