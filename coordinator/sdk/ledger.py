"""Which check requests are in flight or were answered recently: duplicates are skipped.

The check topic is written at least once (a coordinator replay sends a check again with
the same transaction id and check number) and read at least once (offsets are committed
after the answer), so one request may arrive several times. The ledger admits the first
copy; a copy of a request still in flight waits for it (and is acknowledged with it, never
before), a copy of one answered recently is acknowledged at once. Answered keys are kept
in a bounded LRU: memory stays flat however long the producer runs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from enum import Enum

from coordinator.sdk.message import CheckRequest

Key = tuple[str, int]


class Admission(Enum):
    """What `CheckLedger.admit` decided about one request."""

    NEW = "new"  # answer it
    IN_FLIGHT = "in_flight"  # parked until the first copy is answered or abandoned
    ANSWERED = "answered"  # answered recently: acknowledge without asking the listener


class CheckLedger:
    """Thread-safe record of in-flight and recently answered (transaction_id, check_number)."""

    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, not {capacity}")
        self.capacity = capacity
        self._answered: OrderedDict[Key, None] = OrderedDict()
        self._in_flight: dict[Key, list[CheckRequest]] = {}
        self._lock = threading.Lock()

    def admit(self, request: CheckRequest) -> Admission:
        """Return whether `request` is new, a copy of one in flight, or already answered."""
        key = request.key
        with self._lock:
            if key in self._answered:
                self._answered.move_to_end(key)
                return Admission.ANSWERED
            parked = self._in_flight.get(key)
            if parked is not None:
                parked.append(request)
                return Admission.IN_FLIGHT
            self._in_flight[key] = []
            return Admission.NEW

    def answered(self, key: Key) -> list[CheckRequest]:
        """Record `key` as answered; return the copies that waited for it."""
        with self._lock:
            parked = self._in_flight.pop(key, [])
            self._answered[key] = None
            self._answered.move_to_end(key)
            while len(self._answered) > self.capacity:
                self._answered.popitem(last=False)
            return parked

    def abandoned(self, key: Key) -> list[CheckRequest]:
        """Forget in-flight `key` unanswered (a later copy is then new); return its copies."""
        with self._lock:
            return self._in_flight.pop(key, [])

    def in_flight(self) -> int:
        """Return how many distinct requests are admitted and not yet answered or abandoned."""
        with self._lock:
            return len(self._in_flight)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._answered
