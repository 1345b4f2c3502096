"""The driver's word to the program that the preflight ran for exactly this configuration.

A driver that ran the ownership preflight and the strict dry-run itself (``automation.run``)
names the digest of the configuration it checked in ``INFERCRANE_PREFLIGHTED``; the program then
skips its own preflight, and never loads the Kubernetes client (a second or so of every run's
start). Any other configuration, a hand-run ``pulumi up`` included, is preflighted by the
program as ever. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

from infercrane_pulumi.intents import StackConfig

PREFLIGHTED_ENV = "INFERCRANE_PREFLIGHTED"


def digest(config: StackConfig) -> str:
    """Names exactly one configuration, where the cluster is included (a preflight against
    one cluster says nothing about another)."""
    document = config.model_dump(mode="json", by_alias=True)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def done_for(config: StackConfig, environ: Mapping[str, str]) -> bool:
    """Whether the driver that started this process preflighted exactly ``config``."""
    return environ.get(PREFLIGHTED_ENV) == digest(config)
