"""The driver's handoff to the program it serves: what it checked, and what it carries.

A driver that ran the ownership preflight and the strict dry-run itself (``automation.run``)
serves the program in its own process with ``Checked``: the digest of the configuration it
checked and the API server it checked it on. The program refuses to run against any other
server and skips its own preflight for exactly that configuration.

A run that works on some keys while the others are verified unchanged (``cluster.verdict``)
targets only the keys it works on (``automation.targets``). The engine keeps every untargeted
resource that the program does not register exactly as the state holds it, so the program need
not register the verified keys at all; registering them was most of a run's cost in a big stack
(benchmarks/results/history-until-2026-12.md). The driver hands the program each verified key's
record of the stack's outputs, as the stack last wrote it, for exactly one configuration
(``Carried``); the program exports those records as they are and registers the other keys.

Any other configuration, a hand-run ``pulumi up`` included (handed nothing), is preflighted by
the program as ever and registers every key. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infercrane_pulumi.config.intents import StackConfig
from infercrane_pulumi.config.kubeconfigs import ClusterIdentity

Records = Mapping[str, Mapping[str, Any]]


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


@dataclass(frozen=True)
class Carried:
    """The verified keys' output records, for the configuration whose digest is ``digest``."""

    digest: str
    records: Records

    @classmethod
    def of(cls, config: StackConfig, records: Records) -> Carried:
        return cls(digest(config), records)

    def records_for(self, config: StackConfig) -> Records:
        """The records carried for exactly ``config`` (none: register every key)."""
        return self.records if self.digest == digest(config) else {}
