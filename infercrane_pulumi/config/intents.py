"""The configuration's models: the kubernetes settings and the replica intents of one stack,
each field validated on its own (frozen pydantic models), and the values derived from them.

Rules across fields and the one way in (``parse_stack_config``) are ``config.rules``; reading
stack files is ``config.files``. No I/O, nothing about Pulumi or Kubernetes clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, get_args

from pydantic import Field, model_validator

from infercrane_pulumi.config.podsettings import (
    ModelCache,
    ResourceOverrides,
    Resources,
    SecretKeyRef,
    Toleration,
    WorkerKey,
)
from infercrane_pulumi.config.validators import (
    AbsolutePath,
    Argv,
    ArgvText,
    DigestImage,
    DnsLabel,
    DnsSubdomain,
    ExternalKey,
    Kubeconfig,
    LabelValue,
    MemoryQuantity,
    Model,
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
# The context of the Pod's own ServiceAccount (``kubeconfigs.in_cluster``).
IN_CLUSTER_CONTEXT = "in-cluster"
REPLICAS_KEY = f"{CONFIG_NAMESPACE}:replicas"
POLICY_KEY = f"{CONFIG_NAMESPACE}:policy"
ALLOW_EMPTY_KEY = f"{CONFIG_NAMESPACE}:allowEmpty"
# The stack-file key of each top-level field of ``StackConfig`` (by alias): all a stack file's
# ``infercrane`` namespace may hold (``config.rules.parse_stack_section``).
STACK_KEYS: Mapping[str, str] = {
    "kubernetes": KUBERNETES_KEY,
    "replicas": REPLICAS_KEY,
    "policy": POLICY_KEY,
    "allowEmpty": ALLOW_EMPTY_KEY,
}
# The most intents one stack holds: twice the fleet benchmark's 1,000, and a bound on what a
# stack file may ask a runner to hold in memory.
MAX_INTENTS = 2000
# The engine's own namespace in a stack file: Pulumi reads and checks its keys itself.
ENGINE_NAMESPACE = "pulumi"
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


class KubernetesSettings(Model):
    """``infercrane:kubernetes``: where and how the intents of one namespace are deployed."""

    context: Printable
    """The kubeconfig context every run uses, always passed explicitly: never the current
    context. ``in-cluster``: the ServiceAccount of the Pod the driver runs in (its mounted
    token and CA; then no kubeconfig is read, and none may be set)."""
    namespace: DnsLabel = "infercrane-system"
    """The namespace this stack deploys into; one stack per namespace."""
    kubeconfig: Kubeconfig | None = Field(default=None, repr=False)
    """A path, or the contents (YAML or JSON) kept as a Pulumi secret, holding ``context``.
    Unset: ``NamespaceStack`` takes ``PulumiEnvironment.kubeconfig`` (neither: refused); the
    command line and a person's ``pulumi up`` take ``$KUBECONFIG``, then ``~/.kube/config``.
    A relative path is the caller's working directory's (``NamespaceStack``: when constructed),
    the project directory's for a person's ``pulumi up``. Never shown in a repr (contents carry
    credentials)."""
    workload_api: WorkloadApiName = "deployment"
    """What each intent becomes: a Deployment and a Service, or one KServe InferenceService
    (Standard mode)."""
    service_account: DnsLabel = "infercrane-runtime"
    """The runtime Pods' ServiceAccount (its token is not mounted)."""
    worker_secret_name: DnsLabel = "infercrane-worker"
    """The Secret holding the worker credential the runtime checks on every request."""
    worker_secret_key: SecretKey = "api-key"
    """The key of ``workerSecretName`` that holds the credential."""
    image_digest: DigestImage
    """The runtime image, pinned by digest: it ends in ``@sha256:`` and 64 lowercase hex
    digits (a tag before it is allowed)."""
    gpu_resource: QualifiedName = "nvidia.com/gpu"
    """The extended resource each replica asks one of."""
    gpu_product_label: QualifiedName = "nvidia.com/gpu.product"
    """The node label whose value an intent's ``gpu`` must equal."""
    resources: Resources = Resources()
    """CPU and memory of the runtime container; an intent overrides them field by field."""
    startup_seconds: StartupSeconds = 1800
    """The startup probe's allowance: how long a model may take to load before the kubelet
    restarts the container (a 70B model takes about 20 minutes from local disk)."""
    model_cache: ModelCache | None = None
    """Where downloaded weights outlive the container; unset: none."""
    hf_token: SecretKeyRef | None = None
    """``HF_TOKEN`` for the runtime, from this Secret key; InferCrane never reads it."""
    run_as_user: UserId | None = None
    """Run non-root as this user (with ``runAsNonRoot``, ``runAsGroup`` and ``fsGroup``).
    Hardening the official vLLM image cannot take by default (it runs as root and writes
    under /root): set it and ``readOnlyRootFilesystem`` for Pods that meet the "restricted"
    Pod Security level."""
    read_only_root_filesystem: Annotated[bool, Field(strict=True)] = False
    """A read-only root filesystem; ``/tmp`` and the home become emptyDirs."""
    shm_size: MemoryQuantity | None = None
    """Opt-in beyond the InferCrane contract: a Memory emptyDir of this size at ``/dev/shm``
    (vLLM tensor parallelism). Unset keeps the contract's objects unchanged."""
    tolerations: tuple[Toleration, ...] = ()
    """Opt-in beyond the InferCrane contract: tolerations of GPU nodes' taints."""
    runtime_class_name: DnsSubdomain | None = None
    """Opt-in beyond the InferCrane contract: the Pods' RuntimeClass (``nvidia``)."""

    @model_validator(mode="after")
    def _in_cluster_reads_no_kubeconfig(self) -> KubernetesSettings:
        if self.context == IN_CLUSTER_CONTEXT and self.kubeconfig is not None:
            raise ValueError(
                f"context {IN_CLUSTER_CONTEXT!r} is the Pod's own ServiceAccount and reads no "
                "kubeconfig: unset kubeconfig, or name another context"
            )
        return self


class Workload(Model):
    """A portable OCI workload: a custom runtime image with its own argv."""

    image: DigestImage
    """The custom runtime's image, pinned by digest."""
    command: Annotated[Argv, Field(min_length=1)]
    """Its argv; it may use only ``${MODEL}``, ``${MODEL_REVISION}`` (with ``modelRevision``)
    and ``${PORT}``."""
    port: Port | None = None
    """The port it serves on; unset: the intent's ``port``."""
    readiness_path: Annotated[str, Field(pattern=r"^/[\x21-\x7e]*$", max_length=1024)] = "/health"
    """The HTTP path its probes ask."""
    shutdown_grace_seconds: Annotated[int, Field(strict=True, ge=0, le=3600)] = 30
    """How long it may take to stop."""
    cache_path: AbsolutePath = MODEL_CACHE_PATH
    """Where the model cache is mounted (and ``HF_HOME`` points) when one is configured."""
    worker_key: WorkerKey | None = None
    """How it receives the worker credential; unset: as ``INFERCRANE_WORKER_API_KEY`` and
    ``VLLM_API_KEY``."""


class ReplicaIntent(Model):
    """One durable replica intent; its external key alone decides names and ownership."""

    external_key: ExternalKey
    """The durable key (at most 253 bytes, unique in the stack, no surrounding whitespace,
    none equal to another but for case or whitespace): names and ownership derive from it
    alone."""
    model: ArgvText
    """The model the runtime serves (``Qwen/Qwen3-8B``)."""
    model_revision: ArgvText | None = None
    """An immutable revision of the model, passed as ``--revision``."""
    gpu: LabelValue
    """The GPU product, as the node label's value, used verbatim (``NVIDIA-L40S``)."""
    runtime_args: Argv = Field(default_factory=list)
    """More arguments for the runtime; never a credential or a ``$(VAR)`` of one."""
    port: Port = 8000
    """The port the runtime serves on."""
    workload: Workload | None = None
    """A portable OCI workload: a custom runtime in place of the namespace's image."""
    resources: ResourceOverrides = ResourceOverrides()
    """Changes to the namespace's ``resources``, field by field."""
    startup_seconds: StartupSeconds | None = None
    """Over the namespace's ``startupSeconds``."""
    model_cache: ModelCache | None = None
    """In place of the namespace's ``modelCache``."""

    @property
    def effective_port(self) -> int:
        if self.workload is not None and self.workload.port is not None:
            return self.workload.port
        return self.port


RuleId = Literal[
    "image-registry",
    "gpu-product",
    "gpu-budget",
    "runtime-flags",
    "pod-security",
    "model-name",
    "secret-reference",
]
Enforcement = Literal["mandatory", "advisory", "disabled"]
# A registry host, optionally with a port and a path prefix (``ghcr.io/acme``).
Registry = Annotated[
    str,
    Field(pattern=r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*$", max_length=255),
]
Flag = Annotated[str, Field(pattern=r"^--?[A-Za-z0-9][A-Za-z0-9_-]*$", max_length=128)]
DEFAULT_DENIED_FLAGS = ("--trust-remote-code", "--api-key")


class PolicySettings(Model):
    """``infercrane:policy``: what the namespace's platform team allows, and how strictly
    (docs/how-to/policy-pack.md). An unset list allows anything; the denied flags by default are the
    two no replica should carry: ``--trust-remote-code`` runs code from the model's
    repository, an ``--api-key`` in argv is a credential every process listing shows."""

    allowed_registries: tuple[Registry, ...] | None = None
    """Registries (host, port, path prefix: ``ghcr.io/acme``) images may come from; unset:
    any (rule ``image-registry``)."""
    gpu_products: tuple[LabelValue, ...] | None = None
    """GPU products intents may ask for; unset: any (rule ``gpu-product``)."""
    gpu_budget: Annotated[int, Field(strict=True, ge=0)] | None = None
    """At most this many GPUs for the whole stack; unset: no budget (rule ``gpu-budget``)."""
    denied_flags: tuple[Flag, ...] = DEFAULT_DENIED_FLAGS
    """Runtime flags no replica may carry (rule ``runtime-flags``)."""
    allowed_flags: tuple[Flag, ...] = ()
    """Flags this namespace allows although they are denied (``--trust-remote-code`` for a
    team that reviewed the model's code)."""
    pod_security: PodSecurityLevel = "baseline"
    """The Pod Security level the Pods must meet (rule ``pod-security``)."""
    allowed_secrets: tuple[DnsSubdomain, ...] | None = None
    """Secrets a replica's Pod may reference (the worker Secret, ``hfToken``'s); unset: any but
    the runner's own, which no policy allows (rule ``secret-reference``)."""
    model_patterns: tuple[Printable, ...] | None = None
    """Shell-style patterns (``Qwen/*``) a model name must match one of; unset: any (rule
    ``model-name``)."""
    enforcement: Mapping[RuleId, Enforcement] = Field(default_factory=dict)
    """Per rule: ``mandatory`` refuses, ``advisory`` warns, ``disabled`` skips."""

    @classmethod
    def judging_nothing(cls) -> PolicySettings:
        """Every rule disabled: what a removal runs under. It only deletes, and what it keeps
        was judged when it was applied (a newer, stricter policy must not block a removal)."""
        return cls(enforcement=dict.fromkeys(get_args(RuleId), "disabled"))


class StackConfig(Model):
    """Everything one stack deploys: its namespace settings and its replica intents, and the
    policy they must meet."""

    kubernetes: KubernetesSettings
    """``infercrane:kubernetes``: where and how the intents are deployed."""
    replicas: Annotated[tuple[ReplicaIntent, ...], Field(max_length=MAX_INTENTS)]
    """``infercrane:replicas``: the replica intents, the whole desired set: a key it no
    longer names is deleted. Required (a missing or null list is refused, never read as
    empty); ``[]`` empties the namespace, with ``allowEmpty``."""
    policy: PolicySettings = PolicySettings()
    """``infercrane:policy``: what the platform team allows."""
    allow_empty: Annotated[bool, Field(strict=True)] = False
    """``infercrane:allowEmpty``: an ``up`` may delete every replica the stack applied (an
    empty ``replicas``); without it such a run is refused and changes nothing."""


def effective_resources(settings: KubernetesSettings, intent: ReplicaIntent) -> Resources:
    """The namespace's resources with the intent's overrides applied."""
    return settings.resources.model_copy(update=intent.resources.model_dump(exclude_none=True))


def startup_seconds(settings: KubernetesSettings, intent: ReplicaIntent) -> int:
    return intent.startup_seconds or settings.startup_seconds


def model_cache(settings: KubernetesSettings, intent: ReplicaIntent) -> ModelCache | None:
    return intent.model_cache or settings.model_cache
