"""The Kafka path: halves and ops written straight to the ingress topics (contract 5.2).

Records are the documented ingress format, built by the SDK's own
coordinator/protocol/records.py (as the SDK's Kafka transport builds them), written by one
idempotent producer with acks=all, as the contract (5.2) asks of Kafka producers. Per batch:
send every half, wait until all are acknowledged (a producer runs its local transaction
only once its half is stored), then send the batch's ops without waiting; the next batch's
wait covers them. Each op's acknowledgement time is taken in the producer's delivery
callback: that is the moment the producer knows its decision is durable, where
commit-to-visible starts.

The producer is librdkafka's (confluent-kafka), not the SDK's kafka-python: the load runs
on the same cores as the system it measures, and kafka-python's pure-Python client spent
more CPU per transaction than the broker (docs/performance.md). The records are the same
bytes either way; tests/coordinator/bench/test_kafka_driver.py reads them back and compares
them with the SDK's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from coordinator.bench.workload import Kind
from coordinator.protocol.records import half_headers, op_headers
from coordinator.sdk import Message as SdkMessage

#: Seconds a batch's halves (or the last ops) may take to be acknowledged.
ACK_TIMEOUT = 60.0


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
        self._checked: dict[str, dict[str, str]] = {}  # kind name -> properties, checked
        # Records sent whose delivery callback has not run yet (flush() may return while
        # the poller is still running the last callbacks).
        self._outstanding = 0
        self._settled = threading.Condition()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.size": 256 * 1024,
                "message.max.bytes": 4 * 1024 * 1024,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        # Delivery callbacks run in whichever thread polls: this one polls all the time, so
        # an acknowledgement is timed when it arrives, not when a sender next waits.
        self._closing = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="bench-kafka-acks", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._closing.is_set():
            self._producer.poll(0.1)

    def _produce(
        self, topic: str, key: str, value: bytes, headers: Any, acks: dict[str, int]
    ) -> None:
        def delivered(error: KafkaError | None, _: Message) -> None:
            if error is None:
                acks[key] = now_ms()
            else:
                self.errors.append(f"{key}: {error}")
            with self._settled:
                self._outstanding -= 1
                if self._outstanding == 0:  # only _wait() waits, and only for zero
                    self._settled.notify_all()

        with self._settled:
            self._outstanding += 1
        while True:
            try:
                self._producer.produce(
                    topic, value=value, key=key.encode(), headers=headers, on_delivery=delivered
                )
                return
            except BufferError:  # the local queue is full: let deliveries drain it
                self._producer.poll(0.05)
            except BaseException:
                with self._settled:
                    self._outstanding -= 1
                raise

    def send(self, batch: Sequence[tuple[str, Kind]], *, ops: bool = True) -> None:
        """Store the batch's halves (acknowledged on return), then send their ops."""
        born = now_ms()
        for transaction_id, kind in batch:
            headers = half_headers(
                self.group,
                self.topic,
                born,
                keys=[transaction_id],
                properties=self._properties(kind, transaction_id),
                check_immunity_seconds=self.immunity_seconds,
            )
            self._produce(self.half_topic, transaction_id, self.body, headers, self.half_acks)
        self._wait()
        if not ops:
            return
        born = now_ms()
        for transaction_id, kind in batch:
            headers = op_headers(self.group, kind.first_op, False, born)
            self._produce(self.op_topic, transaction_id, b"", headers, self.op_acks)

    def _properties(self, kind: Kind, transaction_id: str) -> dict[str, str]:
        """Return the properties of a half of `kind`, checked once by the SDK's own Message.

        The halves of a kind differ only in their key, a transaction id of the same length
        throughout a run (coordinator/bench/workload.py), so the SDK's checks of a message
        (topic name, header budget) run on the first of each kind, not on every record: they
        cost the load more CPU than sending it (27 of 72 µs per transaction, cProfile).
        """
        properties = self._checked.get(kind.name)
        if properties is None:
            message = SdkMessage(
                topic=self.topic,
                keys=[transaction_id],
                properties={"bench.kind": kind.name},
                check_immunity_seconds=self.immunity_seconds,
            )
            properties = self._checked[kind.name] = dict(message.properties)
        return properties

    def _wait(self) -> None:
        deadline = time.monotonic() + ACK_TIMEOUT
        self._producer.flush(ACK_TIMEOUT)
        with self._settled:
            if not self._settled.wait_for(
                lambda: self._outstanding == 0, max(0.0, deadline - time.monotonic())
            ):
                raise RuntimeError(f"a record was not acknowledged within {ACK_TIMEOUT:.0f} s")
        if self.errors:
            raise RuntimeError(f"Kafka refused {len(self.errors)} record(s): {self.errors[:3]}")

    def finish(self) -> None:
        """Wait until every op sent is acknowledged."""
        self._wait()

    def close(self) -> None:
        """Stop polling and drop whatever was not acknowledged (finish() waits for it)."""
        self._closing.set()
        self._poller.join(5)
        self._producer.purge()
        self._producer.flush(1)
