"""How the real node runs its fake-GPU device plugin: its flags (pure, no I/O).

``infercrane-gpu-device-plugin`` advertises ``gpus`` devices of the GPU resource to the
kubelet through the kubelet's fixed device-plugin directory, so the Node allocates
``nvidia.com/gpu`` and the scheduler and the kubelet's admission count GPUs as on a GPU node.
"""

from __future__ import annotations

from pathlib import Path

from .nodepools import GPU_RESOURCE

DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
DEVICE_PLUGIN_SOCKET = "infercrane-gpu.sock"


def device_plugin_args(*, product: str, gpus: int) -> list[str]:
    return [
        f"--resource-name={GPU_RESOURCE}",
        f"--count={gpus}",
        f"--plugin-dir={DEVICE_PLUGIN_DIR}",
        f"--socket-name={DEVICE_PLUGIN_SOCKET}",
        f"--product={product}",
    ]
