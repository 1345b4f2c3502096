"""Field rules of the configuration: constrained types and the checks behind them.

Each rule is a pure function raising ``ValueError`` with a message that names the rule and,
except for credentials, the offending value; pydantic turns them into per-field problems.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Any

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

MAX_ARGV_ENTRIES = 128
MAX_ARGV_ENTRY_CHARS = 4096
MAX_EXTERNAL_KEY_BYTES = 253
WORKLOAD_PLACEHOLDERS = frozenset({"MODEL", "MODEL_REVISION", "PORT"})

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SECRET_KEY = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_QUALIFIED_NAME = re.compile(
    rf"(?P<prefix>{DNS_SUBDOMAIN.pattern})/(?P<name>{LABEL_VALUE.pattern})"
)
_DIGEST_IMAGE = re.compile(
    r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._/-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?@sha256:[0-9a-f]{64}"
)
# Quantities as Kubernetes writes them, less the forms nobody means for a container's memory or
# CPU (exponents, signs): a number, then a binary or decimal suffix.
_QUANTITY = re.compile(r"(?P<number>[0-9]+(\.[0-9]+)?)(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?")
_SUFFIXES = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
    **{f"{s}i": Decimal(1024) ** (i + 1) for i, s in enumerate("KMGTPE")},
}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
# The longest name, revision or context a stack file may give: a model id is a few dozen
# characters, a revision 40; anything near this is a mistake or an attack on the runner's memory.
MAX_TEXT = 1024
# Kubernetes expands $(VAR) in command and args; either form would put a credential in argv.
_CREDENTIAL_REFERENCES = (
    "${WORKER_API_KEY}",
    "$(INFERCRANE_WORKER_API_KEY)",
    "$(VLLM_API_KEY)",
    "$(HF_TOKEN)",
)


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
    if len(value) > MAX_TEXT:
        # Never quoted: it is long, and a refusal is one line.
        raise ValueError(f"must be at most {MAX_TEXT} characters, got {len(value)}")
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


def quantity_value(value: str) -> Decimal:
    """A quantity this module accepted, as a number of units (bytes, cores)."""
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    return Decimal(match["number"]) * _SUFFIXES[match["suffix"] or ""]


def _quantity(rule: str, suffixes: frozenset[str]) -> AfterValidator:
    def check(value: str) -> str:
        match = _QUANTITY.fullmatch(value) if len(value) <= 64 else None
        if match is None or (match["suffix"] or "") not in suffixes:
            raise ValueError(f"must be {rule}, got {value!r}")
        if quantity_value(value) <= 0:
            raise ValueError(f"must be more than zero, got {value!r}")
        return value

    return AfterValidator(check)


def _absolute_path(value: str) -> str:
    # A mount point or file Kubernetes would accept, written the one way (no "..", no "//").
    if (
        not value.startswith("/")
        or value == "/"
        or posixpath.normpath(value) != value
        or ":" in value
        or len(value) > 1024
    ):
        raise ValueError(f"must be a normalized absolute path other than '/', got {value!r}")
    _printable(value)
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
        reference = _credential_reference(entry)
        if reference is not None:
            raise ValueError(f"entry {index} {reference}")
    return value


def _argv_text(value: str) -> str:
    """A name that goes into the runtime's argv (a model, its revision)."""
    reference = _credential_reference(_printable(value))
    if reference is not None:
        raise ValueError(reference)
    return value


def _credential_reference(text: str) -> str | None:
    """Why ``text`` must never reach argv, if it names a credential: a tenant that picks a
    model named ``$(VLLM_API_KEY)`` would otherwise see the key in the runtime's argv and in
    its "model not found" log line (``podspec.literal`` keeps Kubernetes from expanding any
    ``$(``; this says so to whoever wrote it, before anything runs)."""
    for reference in _CREDENTIAL_REFERENCES:
        if reference in text:
            return (
                f"references {reference}; the worker credential reaches the runtime only "
                "through its environment"
            )
    return None


DnsLabel = Annotated[str, _matching(_DNS_LABEL, "a DNS label starting with a letter", 63)]
DnsSubdomain = Annotated[str, _matching(DNS_SUBDOMAIN, "a DNS subdomain", 253)]
SecretKey = Annotated[
    str, _matching(_SECRET_KEY, "[A-Za-z0-9._-] not starting or ending with '.', '-' or '_'", 253)
]
LabelValue = Annotated[str, _matching(LABEL_VALUE, "a label value", 63)]
QualifiedName = Annotated[str, AfterValidator(_qualified_name)]
DigestImage = Annotated[str, AfterValidator(_digest_pinned)]
Printable = Annotated[str, AfterValidator(_printable)]
Kubeconfig = Annotated[str, AfterValidator(_kubeconfig)]
ExternalKey = Annotated[str, AfterValidator(_external_key)]
Argv = Annotated[list[str], AfterValidator(_argv)]
ArgvText = Annotated[str, AfterValidator(_argv_text)]
Port = Annotated[int, Field(strict=True, ge=1, le=65535)]
MemoryQuantity = Annotated[
    str,
    _quantity("a memory quantity such as '16Gi' or '500M'", frozenset(_SUFFIXES) - {"m"}),
]
CpuQuantity = Annotated[
    str, _quantity("a CPU quantity such as '4' or '500m'", frozenset({"", "m"}))
]
EnvName = Annotated[str, _matching(_ENV_NAME, "an environment variable name", 256)]
AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]


class Model(BaseModel):
    """The base of every configuration model: frozen, an unknown (misspelt) key refused, never
    ignored, camelCase keys. Each field's docstring is its description in the generated
    configuration reference."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )
