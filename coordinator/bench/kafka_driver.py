"""The Kafka path: halves and ops written straight to the ingress topics (SPEC 5.2).

Records are the documented ingress format, built by the SDK's own
protocol/records.py (as the SDK's Kafka transport builds them), written by one
idempotent producer with acks=all, as the README asks of Kafka producers. Per batch:
send every half, wait until all are acknowledged (a producer runs its local transaction
only once its half is stored), then send the batch's ops without waiting; the next batch's
wait covers them. Each op's acknowledgement time is taken in the producer's callback: that
is the moment the producer knows its decision is durable, where commit-to-visible starts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kafka import KafkaProducer

from coordinator.bench.workload import Kind
from coordinator.sdk import Message
from protocol.records import op_headers


def now_ms() -> int:
    """Return the wall clock in epoch milliseconds (the clock Delta's commit files carry)."""
    return time.time_ns() // 1_000_000


class KafkaDriver:
    """Send transactions of one producer group through the Kafka ingress."""

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        topic: str,
        *,
        half_topic: str,
        op_topic: str,
        body_size: int = 100,
        immunity_seconds: int | None = None,
    ) -> None:
        self.group, self.topic = group, topic
        self.half_topic, self.op_topic = half_topic, op_topic
        self.body = b"x" * body_size
        self.immunity_seconds = immunity_seconds
        self.half_acks: dict[str, int] = {}
        self.op_acks: dict[str, int] = {}
        self.errors: list[str] = []
        self._pending: list[Any] = []
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap_servers,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            batch_size=256 * 1024,
            max_request_size=4 * 1024 * 1024,
        )

    def _timed(self, future: Any, acks: dict[str, int], transaction_id: str) -> None:
        def acked(_: Any) -> None:
            acks[transaction_id] = now_ms()

        def failed(exc: BaseException) -> None:
            self.errors.append(f"{transaction_id}: {exc}")

        future.add_callback(acked)
        future.add_errback(failed)
        self._pending.append(future)

    def send(self, batch: Sequence[tuple[str, Kind]], *, ops: bool = True) -> None:
        """Store the batch's halves (acknowledged on return), then send their ops."""
        born = now_ms()
        for transaction_id, kind in batch:
            message = Message(
                topic=self.topic,
                keys=[transaction_id],
                properties={"bench.kind": kind.name},
                check_immunity_seconds=self.immunity_seconds,
            )
            future = self._producer.send(
                self.half_topic,
                key=transaction_id.encode(),
                value=self.body,
                headers=message.half_headers(self.group, born),
            )
            self._timed(future, self.half_acks, transaction_id)
        self._wait()
        if not ops:
            return
        born = now_ms()
        for transaction_id, kind in batch:
            future = self._producer.send(
                self.op_topic,
                key=transaction_id.encode(),
                value=b"",
                headers=op_headers(self.group, kind.first_op, False, born),
            )
            self._timed(future, self.op_acks, transaction_id)

    def _wait(self) -> None:
        self._producer.flush(timeout=60)
        pending, self._pending = self._pending, []
        for future in pending:
            if not future.is_done:
                raise RuntimeError("a record was not acknowledged within 60 s")
        if self.errors:
            raise RuntimeError(f"Kafka refused {len(self.errors)} record(s): {self.errors[:3]}")

    def finish(self) -> None:
        """Wait until every op sent is acknowledged."""
        self._wait()

    def close(self) -> None:
        """Close the producer."""
        self._producer.close(timeout=10)
