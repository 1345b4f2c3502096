"""The driver's word to the program: these keys are verified unchanged and left out of the run.

A run that works on some keys while the others are verified unchanged (``cluster.unchanged``)
targets only the keys it works on (``automation.targets``). The engine keeps every untargeted
resource that the program does not register exactly as the state holds it, so the program need
not register the verified keys at all; registering them was most of a run's cost in a big stack
(README, "Performance"). The driver writes each verified key's record of the stack's outputs,
as the stack last wrote it, to a private file named in ``INFERCRANE_CARRIED``, for exactly one
configuration (its digest); the program exports those records as they are and registers the
other keys. Any other configuration, and a person's ``pulumi up`` (which names no file),
registers every key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infercrane_pulumi import preflighted
from infercrane_pulumi.intents import StackConfig

CARRIED_ENV = "INFERCRANE_CARRIED"
Records = Mapping[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Carried:
    """The verified keys' output records, for the configuration whose digest is ``digest``."""

    digest: str
    records: Records

    @classmethod
    def of(cls, config: StackConfig, records: Records) -> Carried:
        return cls(preflighted.digest(config), records)

    def write(self, directory: Path) -> dict[str, str]:
        """Into a file in ``directory`` (the run's own, 0700); the program's environment."""
        path = directory / "carried.json"
        document = {"digest": self.digest, "replicas": self.records}
        path.write_text(json.dumps(document, separators=(",", ":")), encoding="utf-8")
        return {CARRIED_ENV: str(path)}


def records_for(config: StackConfig, environ: Mapping[str, str]) -> Records:
    """The records the driver carries for exactly ``config`` (none: register every key)."""
    path = environ.get(CARRIED_ENV)
    if not path:
        return {}
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    if document.get("digest") != preflighted.digest(config):
        return {}
    records: Records = document["replicas"]
    return records
