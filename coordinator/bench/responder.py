"""Answers the coordinator's check requests for the bench's producer group.

It is the SDK's own check loop (coordinator/sdk/check_answerer.py: a poller, a bounded
queue, workers) over the SDK's Kafka or REST transport, with a listener that answers by the
kind the transaction id carries (UNKNOWN before the kind's deciding check). The transport
is wrapped to time each deciding answer's acknowledgement (where a checked transaction's
commit-to-visible starts); the listener times each check's arrival (for check timeliness as
the producer sees it: the first check against the half, a later one against the previous).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from coordinator.bench.kafka_driver import now_ms
from coordinator.bench.workload import kind_of
from coordinator.core.state_machine import Event
from coordinator.sdk import (
    CheckAnswerer,
    CheckRequest,
    HalfReceipt,
    LocalTransactionState,
    Message,
    OpReceipt,
    SdkError,
    SendsOps,
    TransactionListener,
    Transport,
)


class BatchTransport(Transport, SendsOps, Protocol):
    """The Kafka and REST transports: every Transport call, and ops stored together."""


_STATES = {
    Event.COMMIT.value: LocalTransactionState.COMMIT_MESSAGE,
    Event.ROLLBACK.value: LocalTransactionState.ROLLBACK_MESSAGE,
    Event.UNKNOWN.value: LocalTransactionState.UNKNOWN,
}


class BenchListener(TransactionListener):
    """Answers a check with the kind's answer; records when each check arrived."""

    def __init__(self) -> None:
        self.first_checks: dict[str, tuple[int, int | None, int | None]] = {}
        #: (transaction id, check number) -> (received, requested_at) of every check, for the
        #: spacing of later checks (a check's due time is the previous one's requested_at).
        self.arrivals: dict[tuple[str, int], tuple[int, int | None]] = {}
        self.checks = 0
        self.unexpected: list[str] = []  # checks of kinds that had already decided
        self._lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Never called: the drivers send halves and ops themselves."""
        raise NotImplementedError("the bench drivers send ops themselves")

    def check_local_transaction(self, msg: CheckRequest) -> LocalTransactionState:
        """Return what the transaction's kind answers to this check number."""
        received = now_ms()
        kind = kind_of(msg.transaction_id)
        with self._lock:
            self.checks += 1
            self.arrivals.setdefault(msg.key, (received, msg.requested_at_ms))
            if msg.check_number == 1 and msg.transaction_id not in self.first_checks:
                self.first_checks[msg.transaction_id] = (
                    received,
                    msg.prepared_at_ms,
                    msg.requested_at_ms,
                )
            if kind is None or not kind.checked:
                self.unexpected.append(msg.transaction_id)
        if kind is None:
            return LocalTransactionState.UNKNOWN
        return _STATES[kind.answer(msg.check_number)]


class TimedTransport:
    """A transport that records when each deciding answer to a check was acknowledged.

    An UNKNOWN answer decides nothing (the coordinator checks again), so only the first
    COMMIT or ROLLBACK of a transaction is timed: a rechecked transaction's commit-to-visible
    starts at the answer to its second check.
    """

    def __init__(self, inner: BatchTransport) -> None:
        self.inner = inner
        self.answer_acks: dict[str, tuple[str, int]] = {}

    def send_half(self, message: Message, transaction_id: str) -> HalfReceipt:
        """Store a half (not used by the responder)."""
        return self.inner.send_half(message, transaction_id)

    def send_op(self, transaction_id: str, op: str, from_check: bool) -> OpReceipt:
        """Store an op; remember when it was acknowledged."""
        receipt = self.inner.send_op(transaction_id, op, from_check)
        if op != Event.UNKNOWN:
            self.answer_acks.setdefault(transaction_id, (op, now_ms()))
        return receipt

    def send_ops(self, ops: Sequence[tuple[str, str, bool]]) -> list[OpReceipt | SdkError]:
        """Store ops together (as the SDK's check loop does); remember when each was stored."""
        results = self.inner.send_ops(ops)
        acked = now_ms()
        for (transaction_id, op, _), result in zip(ops, results, strict=True):
            if not isinstance(result, SdkError) and op != Event.UNKNOWN:
                self.answer_acks.setdefault(transaction_id, (op, acked))
        return results

    def poll_checks(self, max_records: int, wait_seconds: float) -> list[CheckRequest]:
        """Take check requests."""
        return self.inner.poll_checks(max_records, wait_seconds)

    def acknowledge(self, request: CheckRequest) -> None:
        """Mark a request handled."""
        self.inner.acknowledge(request)

    def close(self) -> None:
        """Close the inner transport."""
        self.inner.close()


class Responder:
    """The group's check loop: start, stop, and what it saw."""

    def __init__(self, transport: BatchTransport, group: str, workers: int = 4) -> None:
        self.listener = BenchListener()
        self.transport = TimedTransport(transport)
        self._answerer = CheckAnswerer(
            self.transport,
            self.listener,
            group,
            workers=workers,
            poll_wait_seconds=1.0,
            queue_size=5000,
        )

    def start(self) -> Responder:
        """Start answering in the background."""
        self._answerer.start()
        return self

    def stop(self) -> None:
        """Stop answering and close the transport."""
        try:
            self._answerer.stop(10)
        finally:
            self.transport.close()

    def results(self) -> dict[str, Any]:
        """Return the answers, the checks' arrivals and the counters, as JSON-ready data.

        `arrivals` holds [transaction id, check number, received, requested_at] of every check.
        """
        stats = self._answerer.stats()
        return {
            "answers": {tx: list(value) for tx, value in self.transport.answer_acks.items()},
            "first_checks": {tx: list(v) for tx, v in self.listener.first_checks.items()},
            "arrivals": [[tx, n, *times] for (tx, n), times in self.listener.arrivals.items()],
            "checks_received": self.listener.checks,
            "unexpected_checks": len(self.listener.unexpected),
            "duplicates_skipped": stats.duplicates,
            "answers_refused": stats.refused,
            "abandoned": stats.abandoned,
        }
