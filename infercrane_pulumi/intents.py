"""The configuration's models: the kubernetes settings and the replica intents of one stack,
each field validated on its own (frozen pydantic models), and the values derived from them.

Rules across fields and the one way in (``parse_stack_config``) are ``config_rules``; reading
stack files is ``config_files``. No I/O, nothing about Pulumi or Kubernetes clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from infercrane_pulumi.validators import (
    AbsolutePath,
    Argv,
    CpuQuantity,
    DigestImage,
    DnsLabel,
    DnsSubdomain,
    EnvName,
    ExternalKey,
    Kubeconfig,
    LabelValue,
    MemoryQuantity,
    Port,
    Printable,
    QualifiedName,
    SecretKey,
)

CONFIG_NAMESPACE = "infercrane"
# The workload APIs, one per entry of ``workloads.WORKLOAD_APIS`` (typed against it there, and
# tied to it by a test): what ``infercrane:kubernetes.workloadApi`` accepts.
WorkloadApiName = Literal["deployment", "kserve"]
KUBERNETES_KEY = f"{CONFIG_NAMESPACE}:kubernetes"
REPLICAS_KEY = f"{CONFIG_NAMESPACE}:replicas"
POLICY_KEY = f"{CONFIG_NAMESPACE}:policy"
# How an operator stores kubeconfig contents encrypted (the refusal of plain text names it).
SET_KUBECONFIG_SECRET = f"pulumi config set --secret --path '{KUBERNETES_KEY}.kubeconfig' < file"
# Where the model cache is mounted unless a custom workload says otherwise; HF_HOME points there.
MODEL_CACHE_PATH = "/var/cache/huggingface"
# What the runtime container's environment and filesystem already hold, so a custom workload's
# worker key cannot take its place: variables InferCrane sets, directories it mounts.
HOME_PATH = "/home/runtime"
RESERVED_ENV = frozenset({"HF_TOKEN", "HF_HOME", "HOME"})
RESERVED_MOUNTS = frozenset({"/dev/shm", "/tmp", HOME_PATH})
# A probe allowance in seconds: at least one period, at most a day.
StartupSeconds = Annotated[int, Field(strict=True, ge=1, le=86400)]
UserId = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]
# The Pod Security Standards' levels, least to most restrictive.
PodSecurityLevel = Literal["privileged", "baseline", "restricted"]


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class Toleration(_Model):
    """A pod toleration, for GPU nodes tainted against ordinary workloads."""

    key: QualifiedName | LabelValue | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: Annotated[int, Field(strict=True, ge=0)] | None = None


def _exactly_one(**fields: object) -> None:
    if sum(value is not None for value in fields.values()) != 1:
        raise ValueError(f"set exactly one of {' or '.join(fields)}")


class Resources(_Model):
    """CPU and memory of the runtime container (its GPU is always one ``gpuResource``).

    The defaults are what one single-GPU vLLM replica needs to start and keep serving: the
    API server, the engine core and tokenizer processes want a few cores, loading the weights
    passes them through host memory, and vLLM keeps a CPU swap space (docs/explanation/objects.md).
    No CPU limit by default: throttling an engine that feeds a GPU costs throughput and buys
    nothing on a node the GPU already reserves (KServe mode sets one, see ``podspec``).
    """

    cpu_request: CpuQuantity = "4"
    cpu_limit: CpuQuantity | None = None
    memory_request: MemoryQuantity = "16Gi"
    memory_limit: MemoryQuantity = "32Gi"


class ResourceOverrides(_Model):
    """An intent's changes to the namespace's ``resources``, field by field."""

    cpu_request: CpuQuantity | None = None
    cpu_limit: CpuQuantity | None = None
    memory_request: MemoryQuantity | None = None
    memory_limit: MemoryQuantity | None = None


class ModelCache(_Model):
    """Where downloaded weights outlive the container: an existing PVC, or an emptyDir that
    survives container restarts (not a new Pod) within ``sizeLimit``."""

    claim_name: DnsSubdomain | None = None
    size_limit: MemoryQuantity | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ModelCache:
        _exactly_one(claimName=self.claim_name, sizeLimit=self.size_limit)
        return self


class SecretKeyRef(_Model):
    """One key of a Secret in the namespace: the Pod reads it, InferCrane never does."""

    secret_name: DnsSubdomain
    key: SecretKey


class WorkerKey(_Model):
    """How a custom runtime receives the worker credential: one environment variable, or one
    file (a Secret volume). Either way the value is in neither argv nor the object."""

    env: EnvName | None = None
    file: AbsolutePath | None = None

    @model_validator(mode="after")
    def _one_way(self) -> WorkerKey:
        _exactly_one(env=self.env, file=self.file)
        return self


class KubernetesSettings(_Model):
    """``infercrane:kubernetes``: where and how the intents of one namespace are deployed."""

    context: Printable
    namespace: DnsLabel = "infercrane-system"
    # A path or the contents; never shown in a repr (contents carry credentials).
    kubeconfig: Kubeconfig | None = Field(default=None, repr=False)
    workload_api: WorkloadApiName = "deployment"
    service_account: DnsLabel = "infercrane-runtime"
    worker_secret_name: DnsLabel = "infercrane-worker"
    worker_secret_key: SecretKey = "api-key"
    image_digest: DigestImage
    gpu_resource: QualifiedName = "nvidia.com/gpu"
    gpu_product_label: QualifiedName = "nvidia.com/gpu.product"
    resources: Resources = Resources()
    # The startup probe's allowance: how long a model may take to load before the kubelet
    # restarts the container. A 70B model takes about 20 minutes to load from local disk.
    startup_seconds: StartupSeconds = 1800
    model_cache: ModelCache | None = None
    hf_token: SecretKeyRef | None = None
    # Hardening the official vLLM image cannot take by default (it runs as root and writes
    # under /root): set both for Pods that meet the "restricted" Pod Security level.
    run_as_user: UserId | None = None
    read_only_root_filesystem: Annotated[bool, Field(strict=True)] = False
    # Opt-in beyond the InferCrane contract; unset keeps the contract's objects unchanged.
    shm_size: MemoryQuantity | None = None
    tolerations: tuple[Toleration, ...] = ()
    runtime_class_name: DnsSubdomain | None = None


class Workload(_Model):
    """A portable OCI workload: a custom runtime image with its own argv."""

    image: DigestImage
    command: Annotated[Argv, Field(min_length=1)]
    port: Port | None = None
    readiness_path: Annotated[str, Field(pattern=r"^/[\x21-\x7e]*$", max_length=1024)] = "/health"
    shutdown_grace_seconds: Annotated[int, Field(strict=True, ge=0, le=3600)] = 30
    # Where the model cache is mounted (and HF_HOME points) when one is configured.
    cache_path: AbsolutePath = MODEL_CACHE_PATH
    # Unset: the worker credential arrives as INFERCRANE_WORKER_API_KEY and VLLM_API_KEY.
    worker_key: WorkerKey | None = None


class ReplicaIntent(_Model):
    """One durable replica intent; its external key alone decides names and ownership."""

    external_key: ExternalKey
    model: Printable
    model_revision: Printable | None = None
    gpu: LabelValue
    runtime_args: Argv = Field(default_factory=list)
    port: Port = 8000
    workload: Workload | None = None
    resources: ResourceOverrides = ResourceOverrides()
    startup_seconds: StartupSeconds | None = None
    model_cache: ModelCache | None = None

    @property
    def effective_port(self) -> int:
        if self.workload is not None and self.workload.port is not None:
            return self.workload.port
        return self.port


RuleId = Literal[
    "image-registry", "gpu-product", "gpu-budget", "runtime-flags", "pod-security", "model-name"
]
Enforcement = Literal["mandatory", "advisory", "disabled"]
# A registry host, optionally with a port and a path prefix (``ghcr.io/acme``).
Registry = Annotated[
    str,
    Field(pattern=r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*$", max_length=255),
]
Flag = Annotated[str, Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$", max_length=128)]
DEFAULT_DENIED_FLAGS = ("--trust-remote-code", "--api-key")


class PolicySettings(_Model):
    """``infercrane:policy``: what the namespace's platform team allows, and how strictly
    (docs/how-to/policy-pack.md). An unset list allows anything; the denied flags by default are the
    two no replica should carry: ``--trust-remote-code`` runs code from the model's
    repository, an ``--api-key`` in argv is a credential every process listing shows."""

    allowed_registries: tuple[Registry, ...] | None = None
    gpu_products: tuple[LabelValue, ...] | None = None
    gpu_budget: Annotated[int, Field(strict=True, ge=0)] | None = None
    denied_flags: tuple[Flag, ...] = DEFAULT_DENIED_FLAGS
    # Flags this namespace allows although they are denied (``--trust-remote-code`` for a
    # team that reviewed the model's code).
    allowed_flags: tuple[Flag, ...] = ()
    pod_security: PodSecurityLevel = "baseline"
    # Shell-style patterns (``Qwen/*``) a model name must match one of.
    model_patterns: tuple[Printable, ...] | None = None
    enforcement: Mapping[RuleId, Enforcement] = Field(default_factory=dict)

    @classmethod
    def judging_nothing(cls) -> PolicySettings:
        """Every rule disabled: what a removal runs under. It only deletes, and what it keeps
        was judged when it was applied (a newer, stricter policy must not block a removal)."""
        return cls(enforcement=dict.fromkeys(get_args(RuleId), "disabled"))


class StackConfig(_Model):
    """Everything one stack deploys: its namespace settings and its replica intents, and the
    policy they must meet."""

    kubernetes: KubernetesSettings
    replicas: tuple[ReplicaIntent, ...] = ()
    policy: PolicySettings = PolicySettings()


def effective_resources(settings: KubernetesSettings, intent: ReplicaIntent) -> Resources:
    """The namespace's resources with the intent's overrides applied."""
    return settings.resources.model_copy(update=intent.resources.model_dump(exclude_none=True))


def startup_seconds(settings: KubernetesSettings, intent: ReplicaIntent) -> int:
    return intent.startup_seconds or settings.startup_seconds


def model_cache(settings: KubernetesSettings, intent: ReplicaIntent) -> ModelCache | None:
    return intent.model_cache or settings.model_cache
