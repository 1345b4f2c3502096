"""How many repetitions fit: keeps a full run near its time budget without dropping a size.

Today's cost grows faster than N, so three repetitions at the largest size could take hours.
The run therefore goes in passes: the first pass measures every item once (every size always
has a number), and each later pass repeats an item only if its own first duration still fits in
what is left of the budget. No extrapolation is needed: every estimate is a measured duration
of the same item. A trimmed item says so in the results instead of silently measuring less.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable


class Budget:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds  # 0 or less: no budget, every repetition runs
        self._durations: dict[Hashable, list[float]] = {}

    def record(self, item: Hashable, seconds: float) -> None:
        self._durations.setdefault(item, []).append(seconds)

    def allows(self, item: Hashable, elapsed: float) -> bool:
        """Whether one more repetition of ``item``, as long as its earlier ones, still fits."""
        if self.seconds <= 0:
            return True
        durations = self._durations.get(item)
        expected = statistics.median(durations) if durations else 0.0
        return elapsed + expected <= self.seconds
