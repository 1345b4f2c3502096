"""The digest that names exactly one configuration: what a driver's checks were for.

A driver that ran the ownership preflight and the strict dry-run itself (``automation.run``)
serves the program in its own process with the digest of the configuration it checked; the
program then skips its own preflight for exactly that configuration, and carries the verified
keys only for it (``carried``). Any other configuration, a hand-run ``pulumi up`` included, is
preflighted by the program as ever. Pure.
"""

from __future__ import annotations

import hashlib
import json

from infercrane_pulumi.intents import StackConfig


def digest(config: StackConfig) -> str:
    """Names exactly one configuration, where the cluster is included (a preflight against
    one cluster says nothing about another)."""
    document = config.model_dump(mode="json", by_alias=True)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
