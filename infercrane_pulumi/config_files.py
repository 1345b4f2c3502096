"""Stack files: where a project keeps them, reading one (from disk or a git revision), and
the refusal of kubeconfig contents in plain text. The document's ``config`` section goes
through ``config_rules.parse_stack_config`` like every other configuration.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import yaml

from infercrane_pulumi.config_rules import parse_stack_config
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.intents import (
    KUBERNETES_KEY,
    POLICY_KEY,
    REPLICAS_KEY,
    SET_KUBECONFIG_SECRET,
    PolicySettings,
    StackConfig,
)
from infercrane_pulumi.validators import is_kubeconfig_contents

# Where a project keeps its stack files, and their names: stacks/Pulumi.<stack>.yaml.
STACK_CONFIG_DIR = "stacks"
STACK_FILE = re.compile(r"Pulumi\.(?P<stack>[^/]+)\.yaml")
# libyaml's safe loader and dumper where PyYAML has them (its wheels do): a stack file holds
# every intent, and PyYAML's pure-Python ones take seconds over 1,000 of them.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


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
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError([f"{path}: cannot read ({error.strerror})"]) from error
    return parse_stack_text(text, source=str(path))


def parse_stack_text(text: str, *, source: str) -> StackConfig:
    """Validate a stack file's text wherever it came from (a file, a git revision);
    ``source`` names it in the problems that concern the whole document."""
    try:
        document = load_document(text)
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
    return parse_stack_config(kubernetes, section.get(REPLICAS_KEY), section.get(POLICY_KEY))


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


def put_policy(section: MutableMapping[str, Any], policy: PolicySettings) -> None:
    """Hold ``policy`` in a stack file's ``config`` section as a person would write it: the
    fields that differ from the defaults, and no entry at all for the default policy."""
    record = policy.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    if record:
        section[POLICY_KEY] = record
    else:
        section.pop(POLICY_KEY, None)
