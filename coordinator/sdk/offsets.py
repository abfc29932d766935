"""Which check-topic offsets may be committed: only those below the first unfinished one.

Check requests are answered by a pool of workers, out of order. Committing a partition's
offset past a request that is still being answered would lose it if the producer died, so
the committable offset of a partition is the lowest one taken and not yet done (or one
past the highest taken when all are done): at least once, as Kafka's own consumers do it.

A record taken twice (redelivered after a rebalance) is simply pending again until its
second copy is acknowledged; the ledger acknowledges such copies without asking the
listener again (coordinator/sdk/ledger.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

Partition = tuple[str, int]


class OffsetTracker:
    """Thread-safe taken/done bookkeeping per partition; see the module docstring."""

    def __init__(self) -> None:
        self._pending: dict[Partition, dict[int, bool]] = {}  # offset -> done?
        self._next: dict[Partition, int] = {}
        self._committed: dict[Partition, int] = {}
        self._lock = threading.Lock()

    def taken(self, partition: Partition, offset: int) -> None:
        """Record that the record at `offset` was handed to the producer."""
        with self._lock:
            self._pending.setdefault(partition, {})[offset] = False
            self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def done(self, partition: Partition, offset: int) -> None:
        """Record that the record at `offset` is handled; unknown offsets are ignored."""
        with self._lock:
            pending = self._pending.get(partition)
            if pending is not None and offset in pending:
                pending[offset] = True

    def committable(self) -> dict[Partition, int]:
        """Return {partition: next offset to commit} where it moved since the last commit."""
        result: dict[Partition, int] = {}
        with self._lock:
            for partition, pending in self._pending.items():
                open_offsets = [offset for offset, done in pending.items() if not done]
                position = min(open_offsets) if open_offsets else self._next[partition]
                for offset in [o for o, done in pending.items() if done and o < position]:
                    del pending[offset]
                if position != self._committed.get(partition):
                    result[partition] = position
        return result

    def committed(self, offsets: dict[Partition, int]) -> None:
        """Record that `offsets` were committed."""
        with self._lock:
            for partition, offset in offsets.items():
                if partition in self._next:
                    self._committed[partition] = offset

    def retain(self, partitions: Iterable[Partition]) -> None:
        """Forget every partition but `partitions` (the assignment after a rebalance)."""
        keep = set(partitions)
        with self._lock:
            for partition in [p for p in self._next if p not in keep]:
                self._pending.pop(partition, None)
                self._next.pop(partition, None)
                self._committed.pop(partition, None)

    def pending(self) -> int:
        """Return how many taken offsets are not yet committable."""
        with self._lock:
            return sum(len(p) for p in self._pending.values())
