"""The Pulumi CLI's soft memory limit, sized to the stack a run holds.

The CLI is a Go program. With Go's default collector (``GOGC=100``) its heap grows to about
twice what is live before each collection: at 1,000 intents the live heap is about 240 MB and
the CLI's peak RSS 550 MiB. A memory limit (``GOMEMLIMIT``) makes the collector run before the
heap reaches it, which keeps the peak down for a little more CPU. A fixed limit would be a
hazard: a stack's live heap grows with its resources, and once it nears the limit the
collector runs almost without pause (Go caps it at half the CPU). So the limit grows with what
the run holds: ``BASE_MIB`` plus ``PER_RESOURCE_KIB`` a resource. The live heap measured at 100
and 1,000 intents was about 15 MB plus 75 KB a resource, so the limit is about 1.7 times it at
1,000 and more on smaller stacks. The numbers, and what a fixed limit did at 2,000, are on
docs/explanation/performance.md (issue 51's cut 5).

The CLI passes its environment to the plugins it starts, so the limit is theirs too; the
kubernetes plugin's CPU did not move under it, at 10, 100 or 1,000 intents. An operator's own
``GOGC`` or ``GOMEMLIMIT`` wins: InferCrane then sets neither (``GOGC=100`` is Go's default
without a limit).
"""

from __future__ import annotations

from collections.abc import Mapping

BASE_MIB = 64
PER_RESOURCE_KIB = 112
OPERATOR_SETTINGS = ("GOGC", "GOMEMLIMIT")


def memory_limit(resources: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment that sets the CLI's memory limit for a run whose state holds
    ``resources`` resources (none when ``environ``, the process's own, chose the collector's
    settings)."""
    if any(name in environ for name in OPERATOR_SETTINGS):
        return {}
    kib = BASE_MIB * 1024 + PER_RESOURCE_KIB * resources
    return {"GOMEMLIMIT": f"{-(-kib // 1024)}MiB"}
