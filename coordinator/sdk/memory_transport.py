"""A transport kept in memory: the test double for listeners, producers and the check loop.

Shipped with the package (as bytewax ships its testing sources) so applications can test
their listener against the real producer without a broker.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime

from coordinator.protocol.ingress import msg_id_of, op_id_of
from coordinator.sdk.errors import TransportError
from coordinator.sdk.message import CheckRequest, Message
from coordinator.sdk.transport import HalfReceipt, OpReceipt


class InMemoryTransport:
    """Record halves and ops in lists; hand out check requests added with `add_checks`."""

    def __init__(self) -> None:
        self.halves: list[tuple[str, Message]] = []
        self.ops: list[tuple[str, str, bool]] = []
        self.acknowledged: list[CheckRequest] = []
        #: `max_records` of every poll: shows the producer never asks for more than it can hold.
        self.polled_max: list[int] = []
        #: The next this-many half sends raise a retriable TransportError.
        self.failing_halves = 0
        #: The next this-many op sends raise a retriable TransportError.
        self.failing_ops = 0
        #: The next this-many polls raise a retriable TransportError.
        self.failing_polls = 0
        self.closed = False
        self._checks: deque[CheckRequest] = deque()
        self._changed = threading.Condition()

    def add_checks(self, requests: Iterable[CheckRequest]) -> None:
        """Make `requests` available to the next polls, in order."""
        with self._changed:
            self._checks.extend(requests)
            self._changed.notify_all()

    def pending_checks(self) -> int:
        """Return how many added check requests were not yet polled."""
        with self._changed:
            return len(self._checks)

    def send_half(self, message: Message, transaction_id: str) -> HalfReceipt:
        """Record the half; its msg id is derived as if stored at partition 0."""
        with self._changed:
            if self.failing_halves > 0:
                self.failing_halves -= 1
                raise TransportError("in-memory transport told to fail this half")
            self.halves.append((transaction_id, message))
            offset = len(self.halves) - 1
        return HalfReceipt(transaction_id, msg_id_of(0, offset), datetime.now(UTC), 0, offset)

    def send_op(self, transaction_id: str, op: str, from_check: bool) -> OpReceipt:
        """Record the op."""
        with self._changed:
            if self.failing_ops > 0:
                self.failing_ops -= 1
                raise TransportError("in-memory transport told to fail this op")
            self.ops.append((transaction_id, op, from_check))
            offset = len(self.ops) - 1
        return OpReceipt(transaction_id, op, op_id_of(0, offset), datetime.now(UTC))

    def poll_checks(self, max_records: int, wait_seconds: float) -> list[CheckRequest]:
        """Return up to `max_records` added requests, waiting up to `wait_seconds` for one."""
        with self._changed:
            self.polled_max.append(max_records)
            if self.failing_polls > 0:
                self.failing_polls -= 1
                raise TransportError("in-memory transport told to fail this poll")
            if max_records <= 0:
                return []
            if not self._checks:
                self._changed.wait(wait_seconds)
            taken: list[CheckRequest] = []
            while self._checks and len(taken) < max_records:
                taken.append(self._checks.popleft())
            return taken

    def acknowledge(self, request: CheckRequest) -> None:
        """Record the acknowledgement."""
        with self._changed:
            self.acknowledged.append(request)

    def close(self) -> None:
        """Mark the transport closed."""
        self.closed = True
