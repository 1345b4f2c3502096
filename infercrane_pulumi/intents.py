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
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.validators import (
    PLACEHOLDER,
    WORKLOAD_PLACEHOLDERS,
    Argv,
    DigestImage,
    DnsLabel,
    DnsSubdomain,
    ExternalKey,
    Kubeconfig,
    LabelValue,
    Port,
    Printable,
    QualifiedName,
    Quantity,
    SecretKey,
    kubeconfig_document,
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
    # Opt-in beyond the InferCrane contract; unset keeps the contract's objects unchanged.
    shm_size: Quantity | None = None
    tolerations: tuple[Toleration, ...] = ()
    runtime_class_name: DnsSubdomain | None = None


class Workload(_Model):
    """A portable OCI workload: a custom runtime image with its own argv."""

    image: DigestImage
    command: Annotated[Argv, Field(min_length=1)]
    port: Port | None = None
    readiness_path: Annotated[str, Field(pattern=r"^/[\x21-\x7e]*$", max_length=1024)] = "/health"
    shutdown_grace_seconds: Annotated[int, Field(strict=True, ge=0, le=3600)] = 30


class ReplicaIntent(_Model):
    """One durable replica intent; its external key alone decides names and ownership."""

    external_key: ExternalKey
    model: Printable
    model_revision: Printable | None = None
    gpu: LabelValue
    runtime_args: Argv = Field(default_factory=list)
    port: Port = 8000
    workload: Workload | None = None

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
    if problems or config is None:
        raise ConfigError(problems)
    return config


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
    if isinstance(kubernetes, Mapping) and isinstance(kubernetes.get("kubeconfig"), Mapping):
        # An encrypted (`secure:`) kubeconfig is Pulumi's to decrypt at run time; readers of
        # the file alone (render, doctor, inspect) use KUBECONFIG instead.
        kubernetes = {k: v for k, v in kubernetes.items() if k != "kubeconfig"}
    return parse_stack_config(kubernetes, section.get(REPLICAS_KEY))


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
