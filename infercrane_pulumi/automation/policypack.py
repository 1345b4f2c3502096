"""InferCrane's CrossGuard policy pack (``policy/``) on a driver's run: the one door between the
run path and the pack's directory and configuration file.

A run with a pack is checked before the engine starts (the directory is a pack, its virtualenv
exists, its configuration means something to the rules: ``policy.crossguard``), asks the engine
to run the pack, and reads what the pack found from the engine's policy events, never its text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import yaml
from pulumi import automation as auto

from infercrane_pulumi.automation import engine
from infercrane_pulumi.config.intents import Enforcement, RuleId
from infercrane_pulumi.errors import ConfigError
from infercrane_pulumi.policy import crossguard
from infercrane_pulumi.policy.rules import RULES, Finding

_DESCRIPTIONS = {rule.id: rule.description for rule in RULES}


@dataclass(frozen=True)
class PolicyPack:
    """InferCrane's pack, as a directory (the repository's ``policy/``, or a copy of it), and its
    CrossGuard configuration file (docs/how-to/policy-pack.md); ``None``: the rules' defaults."""

    directory: Path
    config: Path | None = None

    def flags(self) -> tuple[str, ...]:
        config = () if self.config is None else ("--policy-pack-config", str(self.config))
        return ("--policy-pack", str(self.directory), *config)

    def check(self) -> None:
        """Raise one ``ConfigError`` naming every reason the engine could not run the pack."""
        problems = []
        where = f"policy pack {self.directory}"
        try:
            project = yaml.safe_load((self.directory / "PulumiPolicy.yaml").read_text())
        except (OSError, yaml.YAMLError):
            project = None
        runtime = project.get("runtime") if isinstance(project, Mapping) else None
        options = runtime.get("options") if isinstance(runtime, Mapping) else None
        venv = options.get("virtualenv") if isinstance(options, Mapping) else None
        if not isinstance(venv, str):
            problems.append(f"{where}: no PulumiPolicy.yaml naming a Python virtualenv")
        elif not (self.directory / venv / "bin" / "python").is_file():
            problems.append(f"{where}: its virtualenv {venv} is missing (make policy-venv)")
        if self.config is not None:
            try:
                crossguard.check_config(json.loads(self.config.read_text()))
            except (OSError, ValueError) as error:
                problems.append(f"policy pack config {self.config}: not a JSON file ({error})")
            except ConfigError as error:
                problems += error.problems
        if problems:
            raise ConfigError(problems)


def findings(reported: Iterable[auto.PolicyEvent], keys: Mapping[str, str]) -> tuple[Finding, ...]:
    """What InferCrane's pack reported, each once (an ``up`` reports its preview's too), in the
    order reported; ``keys``: the external key of each URN the run stepped on."""
    found: dict[Finding, None] = {}
    for policy in reported:
        if policy.policy_pack_name != crossguard.PACK_NAME:
            continue
        rule = cast(RuleId, policy.policy_name)
        message = engine.policy_message(policy, _DESCRIPTIONS.get(rule))
        # A violation is reported mandatory or advisory (a disabled rule reports none).
        level: Enforcement = "mandatory" if policy.enforcement_level == "mandatory" else "advisory"
        found[Finding(rule, level, keys.get(policy.resource_urn or ""), message)] = None
    return tuple(found)
