"""The driver's word to the program: these keys are verified unchanged and left out of the run.

A run that works on some keys while the others are verified unchanged (``cluster.verdict``) targets
only the keys it works on (``automation.targets``). The engine keeps every untargeted resource that
the program does not register exactly as the state holds it, so the program need not register the
verified keys at all; registering them was most of a run's cost in a big stack
(benchmarks/results/history-until-2026-12.md). The driver, which serves the program in its own
process, hands it each verified key's record of the stack's outputs, as the stack last wrote it, for
exactly one configuration (its digest); the program exports those records as they are and registers
the other keys. Any other configuration, and a person's ``pulumi up`` (handed nothing), registers
every key. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infercrane_pulumi import preflighted
from infercrane_pulumi.intents import StackConfig

Records = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Carried:
    """The verified keys' output records, for the configuration whose digest is ``digest``."""

    digest: str
    records: Records

    @classmethod
    def of(cls, config: StackConfig, records: Records) -> Carried:
        return cls(preflighted.digest(config), records)

    def records_for(self, config: StackConfig) -> Records:
        """The records carried for exactly ``config`` (none: register every key)."""
        return self.records if self.digest == preflighted.digest(config) else {}
