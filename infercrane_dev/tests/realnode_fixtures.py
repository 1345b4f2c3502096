"""What the real-node tests share: whether this machine can run one, and its images."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from infercrane_dev.localcluster import BinaryNotFoundError, find_binary
from infercrane_dev.localcluster.binaries import CONTROL_PLANE_BINARIES, SCHEDULING_BINARIES
from infercrane_dev.localcluster.realnode import unavailable as machine_unfit
from infercrane_dev.localcluster.realnodes import RealNodeSpec
from tests.conformance.harness import unavailable

SERVER_IMAGE = "vllm-openai-standin"
SERVER_PORT = 8000


@dataclass(frozen=True)
class NodeImages:
    archives: tuple[Path, ...]
    sandbox: str
    server: str


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


def build_node_images(out_dir: Path) -> NodeImages:
    """The stand-in images (pause as the sandbox, the vLLM stand-in as the server)."""
    from infercrane_dev.images.build import build_images

    built = {
        image.name.rsplit("/", 1)[1]: image
        for image in build_images(find_binary("infercrane-pause").parent, out_dir)
    }
    return NodeImages(
        archives=tuple(image.archive for image in built.values()),
        sandbox=built["pause"].reference,
        server=built[SERVER_IMAGE].reference,
    )


def node_spec(images: NodeImages, *, gpus: int = 2) -> RealNodeSpec:
    return RealNodeSpec("NVIDIA-L4", gpus, images.archives, images.sandbox)
