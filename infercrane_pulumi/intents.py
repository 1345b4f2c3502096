"""Validated configuration: the kubernetes settings and the replica intents of one stack.

Validation is all-or-nothing and happens before anything is registered or sent to a cluster:
``parse_stack_config`` either returns a frozen ``StackConfig`` or raises one ``ConfigError``
listing every problem, each naming the field and the rule. This module does no I/O beyond
reading a stack file when asked to and knows nothing about Pulumi or Kubernetes clients.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.validators import (
    PLACEHOLDER,
    WORKLOAD_PLACEHOLDERS,
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
    is_kubeconfig_contents,
    kubeconfig_document,
    quantity_value,
)

# Where a project keeps its stack files, and their names: stacks/Pulumi.<stack>.yaml.
STACK_CONFIG_DIR = "stacks"
STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[^/]+)\.yaml")
CONFIG_NAMESPACE = "infercrane"
# The workload APIs, one per entry of ``workloads.WORKLOAD_APIS`` (typed against it there, and
# tied to it by a test): what ``infercrane:kubernetes.workloadApi`` accepts.
WorkloadApiName = Literal["deployment", "kserve"]
KUBERNETES_KEY = f"{CONFIG_NAMESPACE}:kubernetes"
REPLICAS_KEY = f"{CONFIG_NAMESPACE}:replicas"
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
    passes them through host memory, and vLLM keeps a CPU swap space (README, "Resources").
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


class StackConfig(_Model):
    """Everything one stack deploys: its namespace settings and its replica intents."""

    kubernetes: KubernetesSettings
    replicas: tuple[ReplicaIntent, ...] = ()


def parse_stack_config(kubernetes: Any, replicas: Any) -> StackConfig:
    """Validate both config blocks together; raise one ``ConfigError`` naming every problem."""
    problems: list[str] = []
    config: StackConfig | None = None
    try:
        config = StackConfig.model_validate(
            {"kubernetes": kubernetes, "replicas": [] if replicas is None else replicas}
        )
    except ValidationError as error:
        problems.extend(_describe(item) for item in error.errors())
    problems.extend(_duplicate_keys(replicas))
    if config is not None:
        problems.extend(_placeholder_problems(config.replicas))
        problems.extend(_context_problems(config.kubernetes))
        problems.extend(_resource_problems(config))
        problems.extend(_worker_key_problems(config.replicas))
    if problems or config is None:
        raise ConfigError(problems)
    return config


def effective_resources(settings: KubernetesSettings, intent: ReplicaIntent) -> Resources:
    """The namespace's resources with the intent's overrides applied."""
    return settings.resources.model_copy(update=intent.resources.model_dump(exclude_none=True))


def startup_seconds(settings: KubernetesSettings, intent: ReplicaIntent) -> int:
    return intent.startup_seconds or settings.startup_seconds


def model_cache(settings: KubernetesSettings, intent: ReplicaIntent) -> ModelCache | None:
    return intent.model_cache or settings.model_cache


def stack_file(directory: Path, stack: str) -> Path:
    """Where the project in ``directory`` keeps the configuration of ``stack``."""
    return directory / STACK_CONFIG_DIR / f"Pulumi.{stack}.yaml"


def load_stack_file(path: Path) -> StackConfig:
    """Read a ``stacks/Pulumi.<stack>.yaml`` file and validate its ``config`` section."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError([f"{path}: cannot read ({error.strerror})"]) from error
    return parse_stack_text(text, source=str(path))


def parse_stack_text(text: str, *, source: str) -> StackConfig:
    """Validate a stack file's text wherever it came from (a file, a git revision);
    ``source`` names it in the problems that concern the whole document."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError([f"{source}: not valid YAML"]) from error
    section = document.get("config") if isinstance(document, Mapping) else None
    if not isinstance(section, Mapping):
        raise ConfigError([f"{source}: has no 'config' mapping"])
    kubernetes = section.get(KUBERNETES_KEY)
    # A `secure:` value is a mapping here: only a string can be contents in plain text.
    plain = plain_kubeconfig_problems(kubernetes, secret=False)
    if plain:
        raise ConfigError(plain)
    kubeconfig = kubernetes.get("kubeconfig") if isinstance(kubernetes, Mapping) else None
    if isinstance(kubernetes, Mapping) and isinstance(kubeconfig, Mapping):
        # An encrypted (`secure:`) kubeconfig is Pulumi's to decrypt at run time; readers of
        # the file alone (render, doctor, inspect) use KUBECONFIG instead.
        kubernetes = {k: v for k, v in kubernetes.items() if k != "kubeconfig"}
    return parse_stack_config(kubernetes, section.get(REPLICAS_KEY))


def plain_kubeconfig_problems(kubernetes: Any, *, secret: bool) -> list[str]:
    """Kubeconfig contents that are not a Pulumi secret: refused before anything runs, because
    Pulumi would keep them in plain text in the stack file, the state, its backups and the
    update history. ``secret``: whether Pulumi holds ``infercrane:kubernetes`` as a secret."""
    kubeconfig = kubernetes.get("kubeconfig") if isinstance(kubernetes, Mapping) else None
    if secret or not isinstance(kubeconfig, str) or not is_kubeconfig_contents(kubeconfig):
        return []
    return [
        f"{KUBERNETES_KEY}.kubeconfig: kubeconfig contents in plain text; store them "
        f"encrypted: {SET_KUBECONFIG_SECRET}"
    ]


def _describe(item: Mapping[str, Any]) -> str:
    location = item["loc"]
    block = KUBERNETES_KEY if location and location[0] == "kubernetes" else REPLICAS_KEY
    path = block
    for part in location[1:]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    message = str(item["msg"]).removeprefix("Value error, ")
    if item["type"] == "missing":
        message = "is required"
    elif item["type"] == "extra_forbidden":
        message = "is not a known key"
    return f"{path}: {message}"


def _duplicate_keys(replicas: Any) -> list[str]:
    if not isinstance(replicas, list):
        return []
    keys = [item.get("externalKey") for item in replicas if isinstance(item, Mapping)]
    counts = Counter(key for key in keys if isinstance(key, str))
    problems = [
        f"{REPLICAS_KEY}: externalKey {key!r} appears {count} times; keys must be unique"
        for key, count in sorted(counts.items())
        if count > 1
    ]
    # Distinct keys that a person would read as one are almost surely a mistake.
    lookalikes: dict[str, list[str]] = {}
    for key in counts:
        lookalikes.setdefault(" ".join(key.casefold().split()), []).append(key)
    problems += [
        f"{REPLICAS_KEY}: externalKeys {', '.join(repr(k) for k in sorted(group))} differ only "
        "in case or whitespace; use one key per replica"
        for group in lookalikes.values()
        if len(group) > 1
    ]
    return problems


def _placeholder_problems(replicas: tuple[ReplicaIntent, ...]) -> list[str]:
    problems = []
    for index, intent in enumerate(replicas):
        if intent.workload is None:
            continue
        for entry in intent.workload.command:
            for name in PLACEHOLDER.findall(entry):
                where = f"{REPLICAS_KEY}[{index}].workload.command"
                if name not in WORKLOAD_PLACEHOLDERS:
                    known = ", ".join(f"${{{n}}}" for n in sorted(WORKLOAD_PLACEHOLDERS))
                    problems.append(f"{where}: unknown placeholder ${{{name}}} (known: {known})")
                elif name == "MODEL_REVISION" and intent.model_revision is None:
                    problems.append(f"{where}: uses ${{MODEL_REVISION}} but modelRevision is unset")
    return problems


def _context_problems(settings: KubernetesSettings) -> list[str]:
    document = kubeconfig_document(settings.kubeconfig or "")
    if document is None:
        return []  # a path is read at connect time, where a missing context is reported
    contexts = document.get("contexts") or []
    names = {c.get("name") for c in contexts if isinstance(c, Mapping)}
    if settings.context in names:
        return []
    return [
        f"{KUBERNETES_KEY}.context: context {settings.context!r} is not in the kubeconfig "
        "contents given in kubeconfig"
    ]


def _resource_problems(config: StackConfig) -> list[str]:
    settings = config.kubernetes
    problems = _limit_problems(settings.resources, settings, f"{KUBERNETES_KEY}.resources")
    if problems:
        return problems  # every intent inherits them; one line each is enough
    for index, intent in enumerate(config.replicas):
        if intent.resources != ResourceOverrides():
            where = f"{REPLICAS_KEY}[{index}].resources"
            problems += _limit_problems(effective_resources(settings, intent), settings, where)
    return problems


def _limit_problems(resources: Resources, settings: KubernetesSettings, where: str) -> list[str]:
    problems = []
    cpu_request = quantity_value(resources.cpu_request)
    if resources.cpu_limit is not None and quantity_value(resources.cpu_limit) < cpu_request:
        problems.append(
            f"{where}.cpuLimit: {resources.cpu_limit} is below cpuRequest {resources.cpu_request}"
        )
    memory_limit = quantity_value(resources.memory_limit)
    memory_request = quantity_value(resources.memory_request)
    if memory_limit < memory_request:
        problems.append(
            f"{where}.memoryLimit: {resources.memory_limit} is below memoryRequest "
            f"{resources.memory_request}"
        )
    elif settings.shm_size is not None and memory_limit < memory_request + quantity_value(
        settings.shm_size
    ):
        problems.append(
            f"{where}.memoryLimit: {resources.memory_limit} is below memoryRequest "
            f"{resources.memory_request} plus shmSize {settings.shm_size}: /dev/shm is "
            "memory, and a full one counts against the container's memory limit"
        )
    return problems


def _worker_key_problems(replicas: tuple[ReplicaIntent, ...]) -> list[str]:
    problems = []
    for index, intent in enumerate(replicas):
        workload = intent.workload
        if workload is None or workload.worker_key is None:
            continue
        where = f"{REPLICAS_KEY}[{index}].workload.workerKey"
        env, file = workload.worker_key.env, workload.worker_key.file
        if env in RESERVED_ENV:
            problems.append(f"{where}.env: {env} is set by InferCrane; name another variable")
        reference = f"$({env})"
        if env is not None and any(reference in entry for entry in workload.command):
            problems.append(
                f"{REPLICAS_KEY}[{index}].workload.command: references {reference}; the worker "
                "credential reaches the runtime only through its environment"
            )
        if env is not None and any(reference in entry for entry in intent.runtime_args):
            problems.append(
                f"{REPLICAS_KEY}[{index}].runtimeArgs: references {reference}; the worker "
                "credential reaches the runtime only through its environment"
            )
        directory = None if file is None else file.rsplit("/", 1)[0] or "/"
        if directory in {*RESERVED_MOUNTS, workload.cache_path, "/"}:
            problems.append(
                f"{where}.file: {file} would be mounted in {directory}, which InferCrane uses "
                "or which is the root; choose a directory of its own"
            )
    return problems
