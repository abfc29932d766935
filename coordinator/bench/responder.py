"""Answers the coordinator's check requests for the bench's producer group.

It is the SDK's own check loop (coordinator/sdk/check_answerer.py: a poller, a bounded
queue, workers) over the SDK's Kafka or REST transport, with a listener that answers by the
kind the transaction id carries. The transport is wrapped to time each answer's
acknowledgement (where a checked transaction's commit-to-visible starts) and each first
check's arrival (for check timeliness as the producer sees it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

from coordinator.bench.kafka_driver import now_ms
from coordinator.bench.workload import kind_of
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
    "COMMIT": LocalTransactionState.COMMIT_MESSAGE,
    "ROLLBACK": LocalTransactionState.ROLLBACK_MESSAGE,
}


class BenchListener(TransactionListener):
    """Answers a check with the kind's answer; records when each first check arrived."""

    def __init__(self) -> None:
        self.first_checks: dict[str, tuple[int, int | None, int | None]] = {}
        self.checks = 0
        self.unexpected: list[str] = []  # checks of kinds that had already decided
        self._lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Never called: the drivers send halves and ops themselves."""
        raise NotImplementedError("the bench drivers send ops themselves")

    def check_local_transaction(self, msg: CheckRequest) -> LocalTransactionState:
        """Return COMMIT or ROLLBACK as the transaction's kind says."""
        received = now_ms()
        kind = kind_of(msg.transaction_id)
        with self._lock:
            self.checks += 1
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
        return _STATES[kind.check_answer]


class TimedTransport:
    """A transport that records when each answer to a check was acknowledged."""

    def __init__(self, inner: BatchTransport) -> None:
        self.inner = inner
        self.answer_acks: dict[str, tuple[str, int]] = {}

    def send_half(self, message: Message, transaction_id: str) -> HalfReceipt:
        """Store a half (not used by the responder)."""
        return self.inner.send_half(message, transaction_id)

    def send_op(self, transaction_id: str, op: str, from_check: bool) -> OpReceipt:
        """Store an op; remember when it was acknowledged."""
        receipt = self.inner.send_op(transaction_id, op, from_check)
        self.answer_acks.setdefault(transaction_id, (op, now_ms()))
        return receipt

    def send_ops(self, ops: Sequence[tuple[str, str, bool]]) -> list[OpReceipt | SdkError]:
        """Store ops together (as the SDK's check loop does); remember when each was stored."""
        results = self.inner.send_ops(ops)
        acked = now_ms()
        for (transaction_id, op, _), result in zip(ops, results, strict=True):
            if not isinstance(result, SdkError):
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
        """Return the answers, the first checks and the counters, as JSON-ready data."""
        stats = self._answerer.stats()
        return {
            "answers": {tx: list(value) for tx, value in self.transport.answer_acks.items()},
            "first_checks": {tx: list(v) for tx, v in self.listener.first_checks.items()},
            "checks_received": self.listener.checks,
            "unexpected_checks": len(self.listener.unexpected),
            "duplicates_skipped": stats.duplicates,
            "answers_refused": stats.refused,
            "abandoned": stats.abandoned,
        }
