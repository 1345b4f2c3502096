"""The program served from the driver's process: a language runtime on loopback, for one run."""

from __future__ import annotations

import sys

import grpc
import pytest
from pulumi.runtime.proto import language_pb2, language_pb2_grpc

from infercrane_pulumi.automation.engine import serving


def about(address: str) -> str:
    """The executable the runtime at ``address`` says it runs."""
    with grpc.insecure_channel(address) as channel:
        stub = language_pb2_grpc.LanguageRuntimeStub(channel)
        return str(stub.About(language_pb2.AboutRequest(), timeout=5).executable)


def test_the_runtime_answers_on_loopback_while_the_block_runs_and_never_after() -> None:
    with serving.serving(lambda: None) as flags:
        flag, address, *rest = flags
        assert (flag, rest) == ("--client", ["--exec-kind", "auto.inline"])
        assert address.startswith("127.0.0.1:")
        assert about(address) == sys.executable  # this process serves it
    with pytest.raises(grpc.RpcError) as gone:
        about(address)
    assert gone.value.code() == grpc.StatusCode.UNAVAILABLE
