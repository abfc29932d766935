"""One queue's progress in a consumer: what was fetched, what is in flight, what was acked.

RocketMQ's simple consumer acknowledges messages one by one and redelivers one that was
not acknowledged within its invisible duration; its group's committed offset is per queue.
Both meet here: the committed offset is the first offset not yet acknowledged (everything
below it was), so a member that dies loses no message and repeats only those it had not
acknowledged (at least once). Pure bookkeeping: no I/O, and the consumer holds the lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["QueueProgress"]


@dataclass
class QueueProgress:
    """The bookkeeping of one (topic, queue) owned by this member, from offset `start`."""

    #: The first offset not yet acknowledged: what the group commits.
    committed: int
    #: The next offset to read from the table.
    fetched: int = -1
    #: The queue's end as last learned (its next free offset).
    end: int = 0
    #: In flight: offset -> when it becomes visible again (monotonic seconds).
    in_flight: dict[int, float] = field(default_factory=dict)
    #: Acknowledged above `committed` (out of order).
    acked: set[int] = field(default_factory=set)
    #: The delivery attempt of each offset handed out and not settled yet (1 = first).
    attempts: dict[int, int] = field(default_factory=dict)
    #: The committed offset last stored in the group's offsets.
    stored: int = -1

    def __post_init__(self) -> None:
        if self.fetched < 0:
            self.fetched = self.committed
        if self.stored < 0:
            self.stored = self.committed
        self.end = max(self.end, self.fetched)

    def behind(self) -> int:
        """Return how many offsets are known to exist and were not read yet."""
        return max(0, self.end - self.fetched)

    def lag(self) -> int:
        """Return the queue's lag for this group: messages not yet acknowledged."""
        return max(0, self.end - self.committed)

    def next_attempt(self, offset: int) -> int:
        """Return the delivery attempt `offset` would be handed out as now (1 = first)."""
        return self.attempts.get(offset, 0) + 1

    def taken(self, offset: int, visible_again_at: float) -> int:
        """Record that `offset` was handed out; return its delivery attempt (1 = first)."""
        self.in_flight[offset] = visible_again_at
        self.fetched = max(self.fetched, offset + 1)
        attempt = self.next_attempt(offset)
        self.attempts[offset] = attempt
        return attempt

    def attempt_in_flight(self, offset: int) -> int | None:
        """Return the delivery attempt `offset` is in flight as, or None if it is not."""
        return self.attempts.get(offset) if offset in self.in_flight else None

    def skipped(self, offset: int) -> None:
        """Record that `offset` was read and not handed out (its tag is not subscribed)."""
        self.fetched = max(self.fetched, offset + 1)
        self._settle(offset)

    def ack(self, offset: int, attempt: int | None = None) -> bool:
        """Acknowledge `offset`; return False if it is not in flight here (acknowledged
        already, never handed out, or the queue was read again from an older commit), or
        it is in flight as another delivery than `attempt` (None: any): only what was
        handed out, by the delivery that is out now, can move the committed offset."""
        if not self._current(offset, attempt):
            return False
        del self.in_flight[offset]
        self._settle(offset)
        return True

    def _settle(self, offset: int) -> None:
        """Count `offset` as done, and move the committed offset over every done one."""
        self.attempts.pop(offset, None)
        self.acked.add(offset)
        while self.committed in self.acked:
            self.acked.discard(self.committed)
            self.committed += 1

    def postpone(self, offset: int, visible_again_at: float, attempt: int | None = None) -> bool:
        """Move the moment `offset` in flight becomes visible again; False if it is not in
        flight, or in flight as another delivery than `attempt` (None: any)."""
        if not self._current(offset, attempt):
            return False
        self.in_flight[offset] = visible_again_at
        return True

    def _current(self, offset: int, attempt: int | None) -> bool:
        """Return whether `offset` is in flight, as delivery `attempt` (None: any)."""
        in_flight = self.attempt_in_flight(offset)
        return in_flight is not None and attempt in (None, in_flight)

    def due_again(self, now: float) -> list[int]:
        """Return the offsets in flight whose invisible time is over, oldest first."""
        return sorted(offset for offset, at in self.in_flight.items() if at <= now)

    def blocked(self) -> bool:
        """Return whether a message of this queue is in flight (an orderly reader waits)."""
        return bool(self.in_flight)
