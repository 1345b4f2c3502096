"""The hermetic language host as the engine stops it. The engine ends a run by interrupting
each plugin (SIGINT) and killing it 5 s later; a host that ignored the interrupt added those
5 s to every run of a driver started with SIGINT ignored, which is how a background job of a
non-interactive shell (a daemon under ``nohup … &``, a CI step) starts every process."""

from __future__ import annotations

import signal
import subprocess

import pytest

from tests.conformance.harness import ENGINE_BINARIES, require_toolchain

pytestmark = pytest.mark.conformance


def test_the_host_stops_at_the_engines_interrupt_even_when_started_ignoring_it() -> None:
    host = require_toolchain(ENGINE_BINARIES) / "pulumi-language-python"
    # `trap '' INT` then exec: the host inherits SIGINT ignored, as from such a shell.
    with subprocess.Popen(
        ["bash", "-c", f"trap '' INT; exec {host}"], stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            assert int(process.stdout.readline()) > 0  # serving, its port announced
            process.send_signal(signal.SIGINT)
            # Well before the engine's 5 s: the old host sat them out, then was killed.
            assert process.wait(timeout=3) == 0
        finally:
            process.kill()
