"""The rules across fields of one stack's configuration, and the one way to a ``StackConfig``.

Validation is all-or-nothing and happens before anything is registered or sent to a cluster:
``parse_stack_section`` (a stack file's ``config``, as every reader of one sees it) and
``parse_stack_config`` (its values, as ``NamespaceStack`` holds them) either return a frozen
``StackConfig`` or raise one ``ConfigError`` listing every problem, each naming the field and
the rule: the section's keys (each one this program reads; the replicas always given), the
models' own (``intents``), then the rules no single field can check (unique keys,
placeholders, the kubeconfig's context, limits against requests, where a worker key may go).
Pure.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from infercrane_pulumi.config.intents import (
    ALLOW_EMPTY_KEY,
    CONFIG_NAMESPACE,
    ENGINE_NAMESPACE,
    KUBERNETES_KEY,
    POLICY_KEY,
    REPLICAS_KEY,
    RESERVED_ENV,
    RESERVED_MOUNTS,
    STACK_KEYS,
    KubernetesSettings,
    PolicySettings,
    ReplicaIntent,
    StackConfig,
    effective_resources,
)
from infercrane_pulumi.config.podsettings import ResourceOverrides, Resources
from infercrane_pulumi.config.validators import (
    PLACEHOLDER,
    WORKLOAD_PLACEHOLDERS,
    kubeconfig_document,
    quantity_value,
)
from infercrane_pulumi.errors import ConfigError


def parse_stack_section(section: Mapping[str, Any]) -> StackConfig:
    """A stack file's ``config`` section (every key as the file or the engine gives it),
    validated as a whole; raise one ``ConfigError`` naming every problem."""
    problems = key_problems(section)
    try:
        config = parse_stack_config(
            section.get(KUBERNETES_KEY),
            section.get(REPLICAS_KEY),
            section.get(POLICY_KEY),
            allow_empty=section.get(ALLOW_EMPTY_KEY, False),
        )
    except ConfigError as error:
        raise ConfigError([*problems, *error.problems]) from error
    if problems:
        raise ConfigError(problems)
    return config


def key_problems(keys: Iterable[str]) -> list[str]:
    """A stack file's keys that this program does not read, each with the nearest it does.
    InferCrane's namespace holds ``STACK_KEYS`` alone. Pulumi's own (``pulumi:``) are the
    engine's to check. Every other namespace is refused too: the program reads no other
    package's configuration (its provider is configured from ``infercrane:kubernetes``), so
    such a key changes nothing, and is almost always a misspelt one of ours."""
    known = sorted(STACK_KEYS.values())
    problems = []
    for key in sorted(keys):
        namespace = key.partition(":")[0] if ":" in key else CONFIG_NAMESPACE
        if key in known or namespace == ENGINE_NAMESPACE:
            continue
        nearest = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        what = (
            "is not a known key"
            if namespace == CONFIG_NAMESPACE
            else f"is not read by this program (it reads {CONFIG_NAMESPACE}: and "
            f"{ENGINE_NAMESPACE}: keys only)"
        )
        hint = f"did you mean {nearest[0]}?" if nearest else f"known: {', '.join(known)}"
        problems.append(f"{key}: {what}; {hint}")
    return problems


def parse_stack_config(
    kubernetes: Any, replicas: Any, policy: Any = None, *, allow_empty: Any = False
) -> StackConfig:
    """Validate the config blocks together; raise one ``ConfigError`` naming every problem.
    ``replicas`` None (missing or null) is refused: never read as an empty list."""
    problems: list[str] = []
    config: StackConfig | None = None
    document = {
        "kubernetes": kubernetes,
        "policy": {} if policy is None else policy,
        "allowEmpty": allow_empty,
    }
    if replicas is not None:
        document["replicas"] = replicas
    try:
        config = StackConfig.model_validate(document)
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


def parse_kubernetes_section(kubernetes: Any) -> KubernetesSettings:
    """``infercrane:kubernetes`` alone, judged as in a whole stack file: where a report about a
    file whose other keys may be refused reaches its cluster (``cluster.runstatus``)."""
    try:
        settings = KubernetesSettings.model_validate(kubernetes)
    except ValidationError as error:
        located = ({**item, "loc": ("kubernetes", *item["loc"])} for item in error.errors())
        raise ConfigError([_describe(item) for item in located]) from error
    problems = _context_problems(settings)
    if problems:
        raise ConfigError(problems)
    return settings


def parse_policy(document: Any, *, source: str) -> PolicySettings:
    """A platform's policy (``infercrane:policy``'s keys, given apart from the stack file:
    ``--policy``), validated; raise one ``ConfigError`` naming every problem under
    ``source``. Nothing is read as "no limits": the document must be a mapping."""
    if not isinstance(document, Mapping):
        raise ConfigError([f"{source}: must be a mapping of {POLICY_KEY}'s keys"])
    try:
        return PolicySettings.model_validate(document)
    except ValidationError as error:
        raise ConfigError(
            [
                f"{source}: "
                + _describe({**item, "loc": ("policy", *item["loc"])})[len(POLICY_KEY) + 1 :]
                for item in error.errors()
            ]
        ) from error


def _describe(item: Mapping[str, Any]) -> str:
    location = item["loc"]
    path = STACK_KEYS.get(location[0], REPLICAS_KEY) if location else REPLICAS_KEY
    for part in location[1:]:
        if part != "[key]":  # pydantic's marker of a mapping's key: the path already names it
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
    message = str(item["msg"]).removeprefix("Value error, ")
    if item["type"] == "missing" and path == REPLICAS_KEY:
        message = (
            "is required (missing or null is never read as no replicas); `[]` with "
            f"{ALLOW_EMPTY_KEY}: true empties the namespace on purpose"
        )
    elif item["type"] == "missing":
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
