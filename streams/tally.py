"""Running counts of what the streams did, for the status line and the metrics.

The writers add to a `Tally` once per micro-batch from one small aggregate of the batch
(no extra pass over the data). Counts start from the tables' totals when the engine starts
(`Tally.seed`), so they survive restarts; within one process a batch is counted when its
writes finish. Derived gauges:

- pending  = halves landed - final states recorded (duplicated halves make it a slight
  over-estimate until the coordinator forgets them);
- checking = transactions checked at least once - final states reached after a check.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field


@dataclass
class Counts:
    """A snapshot of the tally."""

    halves: int = 0
    ops: int = 0
    quarantined: int = 0
    committed: int = 0
    rolled_back: int = 0
    discarded: int = 0
    checks_sent: int = 0
    first_checks: int = 0
    finals_after_check: int = 0

    @property
    def finals(self) -> int:
        """Return how many transactions reached a final state."""
        return self.committed + self.rolled_back + self.discarded

    @property
    def pending(self) -> int:
        """Return how many transactions have a half and no final state."""
        return max(self.halves - self.finals, 0)

    @property
    def checking(self) -> int:
        """Return how many transactions were checked and are not final yet."""
        return max(self.first_checks - self.finals_after_check, 0)


@dataclass
class Tally:
    """Thread-safe counters, added to by the stream writers and read by anyone."""

    _counts: Counts = field(default_factory=Counts)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, **deltas: int) -> None:
        """Add `deltas` (field name -> amount) to the counts."""
        with self._lock:
            for name, amount in deltas.items():
                setattr(self._counts, name, getattr(self._counts, name) + amount)

    def seed(self, counts: Counts) -> None:
        """Replace the counts (with the tables' totals, at start)."""
        with self._lock:
            self._counts = Counts(**asdict(counts))

    def snapshot(self) -> Counts:
        """Return a copy of the current counts."""
        with self._lock:
            return Counts(**asdict(self._counts))
