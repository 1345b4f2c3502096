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
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from infercrane_pulumi.errors import ConfigError

CONFIG_NAMESPACE = "infercrane"
KUBERNETES_KEY = f"{CONFIG_NAMESPACE}:kubernetes"
REPLICAS_KEY = f"{CONFIG_NAMESPACE}:replicas"

MAX_ARGV_ENTRIES = 128
MAX_ARGV_ENTRY_CHARS = 4096
MAX_EXTERNAL_KEY_BYTES = 253
WORKLOAD_PLACEHOLDERS = frozenset({"MODEL", "MODEL_REVISION", "PORT"})

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SECRET_KEY = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_QUALIFIED_NAME = re.compile(
    rf"(?P<prefix>{_DNS_SUBDOMAIN.pattern})/(?P<name>{_LABEL_VALUE.pattern})"
)
_DIGEST_IMAGE = re.compile(
    r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._/-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}"
)
_QUANTITY = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
# Kubernetes expands $(VAR) in command and args; either form would put the credential in argv.
_CREDENTIAL_REFERENCES = ("${WORKER_API_KEY}", "$(INFERCRANE_WORKER_API_KEY)", "$(VLLM_API_KEY)")


def _matching(pattern: re.Pattern[str], rule: str, max_len: int) -> AfterValidator:
    def check(value: str) -> str:
        if len(value) > max_len or not pattern.fullmatch(value):
            raise ValueError(f"must be {rule} of at most {max_len} characters, got {value!r}")
        return value

    return AfterValidator(check)


def _qualified_name(value: str) -> str:
    match = _QUALIFIED_NAME.fullmatch(value)
    if not match or len(match["prefix"]) > 253 or len(match["name"]) > 63:
        raise ValueError(f"must be a qualified name like 'nvidia.com/gpu', got {value!r}")
    return value


def _digest_pinned(value: str) -> str:
    if not _DIGEST_IMAGE.fullmatch(value):
        raise ValueError(
            f"must be digest-pinned as <repository>@sha256:<64 lowercase hex>, got {value!r}"
        )
    return value


def _printable(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError("must not contain control characters")
    return value


def is_kubeconfig_contents(value: str) -> bool:
    """A path is one line; kubeconfig contents are multi-line YAML or one-line JSON."""
    return "\n" in value or value.lstrip().startswith("{")


def kubeconfig_document(value: str) -> Mapping[str, Any] | None:
    """The parsed contents, or None when ``value`` is a path (or not a mapping)."""
    if not is_kubeconfig_contents(value):
        return None
    try:
        document = yaml.safe_load(value)
    except yaml.YAMLError:
        return None
    return document if isinstance(document, Mapping) else None


def _kubeconfig(value: str) -> str:
    # Messages never quote the value: contents carry credentials.
    if not is_kubeconfig_contents(value):
        return _printable(value)
    if kubeconfig_document(value) is None:
        raise ValueError("contents must be a kubeconfig document (a YAML or JSON mapping)")
    return value


def _external_key(value: str) -> str:
    _printable(value)
    if value != value.strip():
        raise ValueError("must not start or end with whitespace")
    size = len(value.encode("utf-8"))
    if size > MAX_EXTERNAL_KEY_BYTES:
        raise ValueError(f"must be at most {MAX_EXTERNAL_KEY_BYTES} bytes, got {size}")
    return value


def _argv(value: list[str]) -> list[str]:
    if len(value) > MAX_ARGV_ENTRIES:
        raise ValueError(f"must have at most {MAX_ARGV_ENTRIES} entries, got {len(value)}")
    for index, entry in enumerate(value):
        if "\x00" in entry:
            raise ValueError(f"entry {index} contains a NUL byte")
        if len(entry) > MAX_ARGV_ENTRY_CHARS:
            raise ValueError(f"entry {index} is longer than {MAX_ARGV_ENTRY_CHARS} characters")
        for reference in _CREDENTIAL_REFERENCES:
            if reference in entry:
                raise ValueError(
                    f"entry {index} references {reference}; the worker credential reaches "
                    "the runtime only through its environment"
                )
    return value


DnsLabel = Annotated[str, _matching(_DNS_LABEL, "a DNS label starting with a letter", 63)]
DnsSubdomain = Annotated[str, _matching(_DNS_SUBDOMAIN, "a DNS subdomain", 253)]
SecretKey = Annotated[
    str, _matching(_SECRET_KEY, "[A-Za-z0-9._-] not starting or ending with '.', '-' or '_'", 253)
]
LabelValue = Annotated[str, _matching(_LABEL_VALUE, "a label value", 63)]
QualifiedName = Annotated[str, AfterValidator(_qualified_name)]
DigestImage = Annotated[str, AfterValidator(_digest_pinned)]
Printable = Annotated[str, AfterValidator(_printable)]
Kubeconfig = Annotated[str, AfterValidator(_kubeconfig)]
ExternalKey = Annotated[str, AfterValidator(_external_key)]
Argv = Annotated[list[str], AfterValidator(_argv)]
Port = Annotated[int, Field(strict=True, ge=1, le=65535)]
Quantity = Annotated[str, _matching(_QUANTITY, "a memory quantity such as '16Gi'", 64)]


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
    workload_api: Literal["deployment", "kserve"] = "deployment"
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


def load_stack_file(path: Path) -> StackConfig:
    """Read a ``stacks/Pulumi.<stack>.yaml`` file and validate its ``config`` section."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError([f"{path}: cannot read ({error.strerror})"]) from error
    except yaml.YAMLError as error:
        raise ConfigError([f"{path}: not valid YAML"]) from error
    section = document.get("config") if isinstance(document, Mapping) else None
    if not isinstance(section, Mapping):
        raise ConfigError([f"{path}: has no 'config' mapping"])
    return parse_stack_config(section.get(KUBERNETES_KEY), section.get(REPLICAS_KEY))


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
            for name in _PLACEHOLDER.findall(entry):
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
