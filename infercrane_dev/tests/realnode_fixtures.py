"""What the real-node tests share: whether this machine can run one, and its images."""

from __future__ import annotations

from infercrane_dev.localcluster.hostchecks import unavailable as machine_unfit
from infercrane_dev.localcluster.realnodes import RealNodeSpec
from infercrane_dev.toolchain import (
    CONTROL_PLANE_BINARIES,
    SCHEDULING_BINARIES,
    BinaryNotFoundError,
    find_binary,
)
from tests.conformance.harness import unavailable

SERVER_IMAGE = "vllm-openai-standin"
SANDBOX_IMAGE = "pause"
SERVER_PORT = 8000


def require_real_node() -> None:
    """Skip (fail under INFERCRANE_REQUIRE_TOOLS=1) where a real node cannot run."""
    try:
        for name in (*CONTROL_PLANE_BINARIES, *SCHEDULING_BINARIES):
            find_binary(name)
    except BinaryNotFoundError as missing:
        unavailable(f"hermetic toolchain missing ({missing}); run `make tools`")
    problem = machine_unfit()
    if problem is not None:
        unavailable(f"no real node here: {problem}")


def node_spec(*, gpus: int = 2) -> RealNodeSpec:
    return RealNodeSpec("NVIDIA-L4", gpus)
