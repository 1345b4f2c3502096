"""The Pod-level settings a namespace gives every replica and an intent may change: tolerations,
CPU and memory, where downloaded weights are kept, and how credentials reach the container (by
reference to a Secret, never by value). Frozen models, each field validated on its own.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from infercrane_pulumi.config.validators import (
    AbsolutePath,
    CpuQuantity,
    DnsSubdomain,
    EnvName,
    LabelValue,
    MemoryQuantity,
    Model,
    QualifiedName,
    SecretKey,
)


class Toleration(Model):
    """A pod toleration, for GPU nodes tainted against ordinary workloads."""

    key: QualifiedName | LabelValue | None = None
    """The taint's key; unset with ``Exists``: every taint."""
    operator: Literal["Exists", "Equal"] = "Equal"
    """``Equal``: the taint's value must be ``value``; ``Exists``: any value."""
    value: LabelValue | None = None
    """The taint's value, for ``Equal``."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    """The taint effect tolerated; unset: every effect."""
    toleration_seconds: Annotated[int, Field(strict=True, ge=0)] | None = None
    """With ``NoExecute``: how long the Pod stays once the taint appears; unset: for ever."""


def _exactly_one(**fields: object) -> None:
    if sum(value is not None for value in fields.values()) != 1:
        raise ValueError(f"set exactly one of {' or '.join(fields)}")


class Resources(Model):
    """CPU and memory of the runtime container (its GPU is always one ``gpuResource``).

    The defaults are what one single-GPU vLLM replica needs to start and keep serving: the
    API server, the engine core and tokenizer processes want a few cores, loading the weights
    passes them through host memory, and vLLM keeps a CPU swap space (docs/explanation/objects.md).
    No CPU limit by default: throttling an engine that feeds a GPU costs throughput and buys
    nothing on a node the GPU already reserves (KServe mode sets one, see ``podspec``).
    """

    cpu_request: CpuQuantity = "4"
    """CPU the scheduler reserves for the container."""
    cpu_limit: CpuQuantity | None = None
    """CPU limit, at least the request; unset: none (KServe mode: the request)."""
    memory_request: MemoryQuantity = "16Gi"
    """Memory the scheduler reserves for the container."""
    memory_limit: MemoryQuantity = "32Gi"
    """Memory limit: at least ``memoryRequest``, plus ``shmSize`` when set (a full
    ``/dev/shm`` is memory charged to the container)."""


class ResourceOverrides(Model):
    """An intent's changes to the namespace's ``resources``, field by field."""

    cpu_request: CpuQuantity | None = None
    """Over the namespace's ``resources.cpuRequest``."""
    cpu_limit: CpuQuantity | None = None
    """Over the namespace's ``resources.cpuLimit``."""
    memory_request: MemoryQuantity | None = None
    """Over the namespace's ``resources.memoryRequest``."""
    memory_limit: MemoryQuantity | None = None
    """Over the namespace's ``resources.memoryLimit``."""


class ModelCache(Model):
    """Where downloaded weights outlive the container: an existing PVC, or an emptyDir that
    survives container restarts (not a new Pod) within ``sizeLimit``."""

    claim_name: DnsSubdomain | None = None
    """An existing PersistentVolumeClaim in the namespace (exactly one of the two)."""
    size_limit: MemoryQuantity | None = None
    """An emptyDir of at most this size (exactly one of the two)."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelCache:
        _exactly_one(claimName=self.claim_name, sizeLimit=self.size_limit)
        return self


class SecretKeyRef(Model):
    """One key of a Secret in the namespace: the Pod reads it, InferCrane never does."""

    secret_name: DnsSubdomain
    """The Secret's name, in the stack's namespace."""
    key: SecretKey
    """The key within it."""


class WorkerKey(Model):
    """How a custom runtime receives the worker credential: one environment variable, or one
    file (a Secret volume). Either way the value is in neither argv nor the object."""

    env: EnvName | None = None
    """One environment variable (not ``HF_TOKEN``, ``HF_HOME`` or ``HOME``; exactly one of
    the two)."""
    file: AbsolutePath | None = None
    """A read-only Secret file: a normalized absolute path outside ``/``, ``/tmp``,
    ``/dev/shm``, the home and the cache (its directory is mounted; exactly one of the two)."""

    @model_validator(mode="after")
    def _one_way(self) -> WorkerKey:
        _exactly_one(env=self.env, file=self.file)
        return self
