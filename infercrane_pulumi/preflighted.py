"""The digest that names exactly one configuration: what a driver's checks were for.

A driver that ran the ownership preflight and the strict dry-run itself (``automation.run``)
serves the program in its own process with the digest of the configuration it checked and the
API server it checked it on; the program refuses to run against any other server, skips its own
preflight for exactly that configuration, and carries the verified keys only for it
(``carried``). Any other configuration, a hand-run ``pulumi up`` included, is
preflighted by the program as ever. Pure.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from infercrane_pulumi.intents import StackConfig
from infercrane_pulumi.kubeconfigs import ClusterIdentity


def digest(config: StackConfig) -> str:
    """Names exactly one configuration, where the cluster is included (a preflight against
    one cluster says nothing about another)."""
    document = config.model_dump(mode="json", by_alias=True)
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Checked:
    """What a driver checked before it served the program: exactly this configuration
    (``digest``), on the API server its client reached (``kubeconfigs.ClusterIdentity``)."""

    digest: str
    # None only from a recorded transport (unit tests): no program's provider reaches it.
    cluster: ClusterIdentity | None
