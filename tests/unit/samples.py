"""Valid configuration blocks the unit tests start from and then break or extend."""

from __future__ import annotations

from typing import Any

DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example/vllm/vllm-openai@{DIGEST}"
WORKLOAD_IMAGE = f"registry.example/lmsysorg/sglang@sha256:{'cd' * 32}"
# A credential value that must never surface anywhere the tests can see.
SECRET_VALUE = "sk-test-4f0c2b9e-never-print-me"


def kubernetes(**overrides: Any) -> dict[str, Any]:
    return {"context": "kind-infercrane", "imageDigest": IMAGE} | overrides


def every_setting(**overrides: Any) -> dict[str, Any]:
    """Every opt-in and hardening setting of ``infercrane:kubernetes`` at once."""
    return kubernetes(
        shmSize="8Gi",
        runtimeClassName="nvidia",
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        resources={"cpuRequest": "6", "cpuLimit": "8", "memoryRequest": "24Gi"},
        startupSeconds=600,
        modelCache={"claimName": "hf-cache"},
        hfToken={"secretName": "hf-token", "key": "token"},
        runAsUser=10001,
        readOnlyRootFilesystem=True,
        **overrides,
    )


def replica(**overrides: Any) -> dict[str, Any]:
    return {"externalKey": "dep-7-r0", "model": "Qwen/Qwen3-8B", "gpu": "NVIDIA-L40S"} | overrides


def workload(**overrides: Any) -> dict[str, Any]:
    return {
        "image": WORKLOAD_IMAGE,
        "command": [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "${MODEL}",
            "--port",
            "${PORT}",
        ],
        "port": 30000,
        "readinessPath": "/ready",
        "shutdownGraceSeconds": 45,
    } | overrides


# Kubeconfig *contents* (not a path): multi-line YAML whose key must stay secret.
KUBECONFIG_CONTENTS = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: u
  user: {client-key-data: c2VjcmV0LWtleQ==}
contexts:
- name: kind-infercrane
  context: {cluster: c, user: u}
"""
