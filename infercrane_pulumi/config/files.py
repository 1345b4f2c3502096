"""Stack files: where a project keeps them, reading one (from disk, once it is whole:
``read_settled``, or from a git revision), writing one (every writer's one way:
``write_config``), and the refusal of kubeconfig contents in plain text. The document's
``config`` section goes through ``config.rules.parse_stack_section``, as the program's own
configuration does.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from infercrane_pulumi.config.intents import (
    ALLOW_EMPTY_KEY,
    KUBERNETES_KEY,
    POLICY_KEY,
    REPLICAS_KEY,
    SET_KUBECONFIG_SECRET,
    KubernetesSettings,
    PolicySettings,
    StackConfig,
)
from infercrane_pulumi.config.rules import (
    parse_kubernetes_section,
    parse_policy,
    parse_stack_section,
)
from infercrane_pulumi.config.validators import is_kubeconfig_contents
from infercrane_pulumi.errors import ConfigError, StaleDesiredStateError

# Where a project keeps its stack files, and their names: stacks/Pulumi.<stack>.yaml.
STACK_CONFIG_DIR = "stacks"
STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[^/]+)\.yaml")
# libyaml's safe loader and dumper where PyYAML has them (its wheels do): a stack file holds
# every intent, and PyYAML's pure-Python ones take seconds over 1,000 of them.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def settings_record(settings: KubernetesSettings) -> dict[str, Any]:
    """The settings as the stack's outputs record what a run applied (``SETTINGS_OUTPUT``) and
    as a stack file holds them in plain text: all of them but the kubeconfig, where the
    credentials are."""
    record: dict[str, Any] = settings.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"kubeconfig"}
    )
    return record


def stack_file(directory: Path, stack: str) -> Path:
    """Where the project in ``directory`` keeps the configuration of ``stack``."""
    return directory / STACK_CONFIG_DIR / f"Pulumi.{stack}.yaml"


def load_document(text: str) -> Any:
    """A stack file's text as data (``yaml.YAMLError`` if it is not YAML)."""
    return yaml.load(text, Loader=_LOADER)  # a safe loader, C or Python


def dump_document(document: Any) -> str:
    """A stack file's text, keys in the document's order."""
    return yaml.dump(document, Dumper=_DUMPER, sort_keys=False)


def load_stack_file(path: Path) -> StackConfig:
    """Read a ``stacks/Pulumi.<stack>.yaml`` file and validate its ``config`` section."""
    return parse_stack_text(read_settled(path), source=str(path))


def load_policy_file(path: Path) -> PolicySettings:
    """A platform's policy file (``--policy``: a mapping of ``infercrane:policy``'s keys),
    validated."""
    source = f"--policy {path}"
    try:
        document = load_document(read_settled(path))
    except yaml.YAMLError as error:
        raise ConfigError([f"{source}: not valid YAML"]) from error
    return parse_policy(document, source=source)


# What ``up --every`` waits for before it reads the file it watches: nothing written to it for
# this long, so that a writer that rewrites it in place (not by rename) is never read half-way,
# unless it pauses this long midway. A one-shot command is called by whoever wrote the file,
# once written: it only makes sure the file did not change while it was read.
QUIET_SECONDS = 1.0
# How long a file may keep changing before a reader gives up (retryably).
SETTLE_SECONDS = 30.0


def read_settled(
    path: Path,
    *,
    quiet: float = 0.0,
    within: float = SETTLE_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """``path``'s text once it has been left alone for ``quiet`` seconds and did not change
    while it was read (``StaleDesiredStateError`` if it keeps changing for ``within``)."""
    deadline = time.monotonic() + within
    previous: str | None = None
    while True:
        try:
            before = path.stat()
            text = path.read_text(encoding="utf-8")
            after = path.stat()
        except OSError as error:
            raise ConfigError([f"{path}: cannot read ({error.strerror})"]) from error
        age = time.time() - after.st_mtime
        whole = (after.st_ino, after.st_size, after.st_mtime_ns) == (
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        )
        # A modification time ahead of this clock (another host's) says nothing: then two
        # reads ``quiet`` apart must agree.
        if whole and (age >= quiet or (age < 0 and text == previous)):
            return text
        if time.monotonic() >= deadline:
            raise StaleDesiredStateError(
                f"{path}: still being written after {within:g} s; write it aside and rename "
                "it into place"
            )
        previous = text
        sleep(quiet - age if 0 <= age < quiet else quiet)


# More values than any stack file within the bounds holds (2,000 intents of every field, a few
# hundred values each): what a document may expand to.
MAX_VALUES = 1_000_000


def _values(document: Any) -> int:
    """How many values ``document`` holds with every alias expanded, counted up to just past
    ``MAX_VALUES`` (a walk that stops there, whatever the aliases would expand to)."""
    count, pending = 0, [document]
    while pending and count <= MAX_VALUES:
        value = pending.pop()
        count += 1
        if isinstance(value, Mapping):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
    return count


def parse_stack_text(text: str, *, source: str) -> StackConfig:
    """Validate a stack file's text wherever it came from (a file, a git revision);
    ``source`` names it in the problems that concern the whole document."""
    section = _config_section(text, source=source)
    return parse_stack_section({**section, KUBERNETES_KEY: _readable_settings(section)})


def parse_stack_settings(text: str, *, source: str) -> KubernetesSettings:
    """A stack file's ``infercrane:kubernetes`` alone, validated as ``parse_stack_text`` does,
    whatever the rest of the file holds."""
    return parse_kubernetes_section(_readable_settings(_config_section(text, source=source)))


def _config_section(text: str, *, source: str) -> Mapping[str, Any]:
    try:
        document = load_document(text)
    except yaml.YAMLError as error:
        raise ConfigError([f"{source}: not valid YAML"]) from error
    # An alias (spelt *name) repeats what it names as often as it is used: a few hundred bytes
    # of them nested expand into more values than a runner holds (a 218 KB file once rendered
    # 81 MB of objects). PyYAML writes them too, for one object met twice: they are counted,
    # as expanded, and only a document of too many values is refused.
    if "*" in text and _values(document) > MAX_VALUES:
        raise ConfigError(
            [
                f"{source}: expands to more than {MAX_VALUES:,} values (YAML aliases?); write "
                "each value out"
            ]
        )
    section = document.get("config") if isinstance(document, Mapping) else None
    if not isinstance(section, Mapping):
        raise ConfigError([f"{source}: has no 'config' mapping"])
    return section


def _readable_settings(section: Mapping[str, Any]) -> Any:
    """``infercrane:kubernetes`` as this process may read it: contents in plain text refused,
    an encrypted (``secure:``) kubeconfig left out, Pulumi's to decrypt at run time (readers
    of the file alone, such as render, doctor and inspect, use KUBECONFIG instead)."""
    kubernetes = section.get(KUBERNETES_KEY)
    # A `secure:` value is a mapping here: only a string can be contents in plain text.
    plain = plain_kubeconfig_problems(kubernetes, secret=False)
    if plain:
        raise ConfigError(plain)
    kubeconfig = kubernetes.get("kubeconfig") if isinstance(kubernetes, Mapping) else None
    if isinstance(kubernetes, Mapping) and isinstance(kubeconfig, Mapping):
        return {k: v for k, v in kubernetes.items() if k != "kubeconfig"}
    return kubernetes


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


def kubeconfig_entry(path: Path) -> Any:
    """The kubeconfig entry of the stack file at ``path`` as the file holds it (None: none)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    section = (load_document(text) or {}).get("config") or {}
    return (section.get(KUBERNETES_KEY) or {}).get("kubeconfig")


def write_config(path: Path, config: StackConfig, *, kubeconfig: Any = None) -> None:
    """Hold ``config`` in the stack file at ``path``, the one writer of stack files: its
    settings (``settings_record``: no kubeconfig) with ``kubeconfig`` as the file's entry
    (a path, or Pulumi's ``secure:`` value as the file held it; None: none), its intents and
    its policy, everything else of the document kept (the encryption salt). Written aside and
    renamed, and only when it changes."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    document = load_document(text) or {}
    section = document.setdefault("config", {})
    settings = settings_record(config.kubernetes)
    if kubeconfig is not None:
        settings["kubeconfig"] = kubeconfig
    section[KUBERNETES_KEY] = settings
    section[REPLICAS_KEY] = [
        intent.model_dump(mode="json", by_alias=True) for intent in config.replicas
    ]
    record = config.policy.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    # As a person would write it: the fields that differ from the defaults, no entry at all for
    # the default policy.
    if record:
        section[POLICY_KEY] = record
    else:
        section.pop(POLICY_KEY, None)
    if config.allow_empty:
        section[ALLOW_EMPTY_KEY] = True
    else:
        section.pop(ALLOW_EMPTY_KEY, None)
    updated = dump_document(document)
    if updated != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(updated, encoding="utf-8")
        partial.replace(path)
