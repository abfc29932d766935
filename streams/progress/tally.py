"""Running counts of what the streams did, for the status line and the metrics.

The writers add to a `Tally` once per micro-batch from one small aggregate of the batch
(no extra pass over the data). Counts start from the tables' totals when the engine starts
(`Tally.seed`), so they survive restarts; within one process a batch is counted when its
writes finish. Derived gauges:

- pending  = halves landed - final states recorded (duplicated halves make it a slight
  over-estimate until the coordinator forgets them);
- checking = transactions checked at least once - final states reached after a check;
- pending per real topic, the same way (RocketMQ's `rocketmq_half_messages` gauge).

The finish latency (store time of the half to the batch that recorded its COMMITTED or
ROLLED_BACK state) is kept as a histogram of this process's lifetime, in `FINISH_BUCKETS_S`.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

#: Upper bounds (seconds) of the finish-latency histogram's buckets; +Inf is implied.
FINISH_BUCKETS_S = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)


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
    halves_by_topic: Counter[str] = field(default_factory=Counter)
    finals_by_topic: Counter[str] = field(default_factory=Counter)
    #: How many finishes fell in each bucket of FINISH_BUCKETS_S (and one more: +Inf).
    finish_buckets: tuple[int, ...] = (0,) * (len(FINISH_BUCKETS_S) + 1)
    finish_seconds_total: float = 0.0

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

    def pending_by_topic(self) -> dict[str, int]:
        """Return the pending transactions of each real topic that ever had a half."""
        return {
            topic: max(halves - self.finals_by_topic[topic], 0)
            for topic, halves in sorted(self.halves_by_topic.items())
        }

    def copy(self) -> Counts:
        """Return an independent copy."""
        return replace(
            self,
            halves_by_topic=Counter(self.halves_by_topic),
            finals_by_topic=Counter(self.finals_by_topic),
        )


@dataclass
class Tally:
    """Thread-safe counters, added to by the stream writers and read by anyone."""

    _counts: Counts = field(default_factory=Counts)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # How many times `add` was called; waited on by `wait_past`.
    _version: int = field(default=0, init=False)
    _changed: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self._changed = threading.Condition(self._lock)

    def add(self, **deltas: int) -> None:
        """Add `deltas` (field name -> amount) to the counts."""
        with self._lock:
            for name, amount in deltas.items():
                setattr(self._counts, name, getattr(self._counts, name) + amount)
            self._version += 1
            self._changed.notify_all()

    @property
    def version(self) -> int:
        """Return how many times counts were added (to wait for the next, `wait_past`)."""
        with self._lock:
            return self._version

    def wait_past(self, version: int, timeout: float) -> int:
        """Wait at most `timeout` s until counts are added after `version`; return the latest.

        A reader that acts on every micro-batch's counts (the benchmark's in-flight window)
        learns them when the batch is written, not at its next poll.
        """
        with self._changed:
            self._changed.wait_for(lambda: self._version != version, timeout)
            return self._version

    def add_by_topic(
        self, halves: Mapping[str, int] | None = None, finals: Mapping[str, int] | None = None
    ) -> None:
        """Add per-real-topic counts of landed halves and recorded final states."""
        with self._lock:
            self._counts.halves_by_topic.update(halves or {})
            self._counts.finals_by_topic.update(finals or {})

    def observe_finishes(self, buckets: Mapping[int, int], seconds_total: float) -> None:
        """Add finishes: bucket index (into FINISH_BUCKETS_S, last = +Inf) -> how many."""
        with self._lock:
            c = self._counts
            c.finish_buckets = tuple(n + buckets.get(i, 0) for i, n in enumerate(c.finish_buckets))
            c.finish_seconds_total += seconds_total

    def seed(self, counts: Counts) -> None:
        """Replace the counts (with the tables' totals, at start)."""
        with self._lock:
            self._counts = counts.copy()

    def snapshot(self) -> Counts:
        """Return a copy of the current counts."""
        with self._lock:
            return self._counts.copy()
