"""One idempotent producer for every request: a record is acknowledged only once durable.

`acks="all"` with `enable_idempotence=True` (SPEC 7.7): a 201/202 is sent after the broker
has written the record to every in-sync replica, and the producer's own retries never
duplicate or reorder it. A batch is answered record by record (`send_halves`, `send_ops`):
each record's outcome is its own broker acknowledgement or failure, so the caller can say
exactly which records are durable. The producer is created on first use, so the REST starts (and
answers 503) while Kafka is down, and recovers once it is back; a producer that failed
for good is dropped and the next request builds a new one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kafka import KafkaProducer
from kafka import errors as kafka_errors

from coordinator.rest.records import Record
from core.errors import KafkaUnavailableError, RecordTooLargeError
from core.kafka_clients import kafka_python_options
from core.kafka_security import AuthenticationWatch, KafkaSecurity
from core.topics import TopicLayout
from protocol import ingress as fmt
from protocol.ingress import HEADER_ALLOWANCE_BYTES

log = logging.getLogger("txcoord.rest.kafka")

#: How long a new producer or consumer tries to reach the bootstrap servers.
BOOTSTRAP_TIMEOUT_MS = 5000

_TOO_LARGE = tuple(
    getattr(kafka_errors, name)
    for name in ("MessageSizeTooLargeError", "RecordListTooLargeError")
    if hasattr(kafka_errors, name)
)


#: Why one record was not acknowledged: Kafka unreachable (retry) or refused as too large.
WriteFailure = KafkaUnavailableError | RecordTooLargeError


@dataclass(frozen=True)
class Stored:
    """Where the broker stored a record, and when (its LogAppendTime, epoch ms)."""

    partition: int
    offset: int
    timestamp_ms: int


class KafkaWriter:
    """Write half and op records through one shared idempotent producer; thread-safe."""

    def __init__(
        self,
        bootstrap_servers: str,
        layout: TopicLayout,
        *,
        max_message_size: int,
        ack_timeout: timedelta = timedelta(seconds=30),
        client_id: str = "txcoord-rest",
        security: KafkaSecurity | None = None,
        ensure_group_topics: Callable[[str], object] | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security or KafkaSecurity()
        #: Where each record goes: the shared topics, or its group's own (core/topics.py).
        self.layout = layout
        # Creates a group's topics before its first record (per-group layout), if given.
        self._ensure_group_topics = ensure_group_topics
        self._groups_ready: set[str] = set()
        self.max_message_size = max_message_size
        self.ack_timeout = ack_timeout
        self.client_id = client_id
        self._lock = threading.Lock()
        self._producer: Any = None

    def send_half(self, record: Record) -> Stored:
        """Write one half message; return where it was stored once acknowledged."""
        return _stored_or_raise(self.send_halves([record])[0])

    def send_op(self, record: Record) -> Stored:
        """Write one op record; return where it was stored once acknowledged."""
        return _stored_or_raise(self.send_ops([record])[0])

    def send_halves(self, records: Sequence[Record]) -> list[Stored | WriteFailure]:
        """Write several half messages; return each one's outcome, in order."""
        return self._send_each([self._topic(self.layout.half_topic, r) for r in records], records)

    def send_ops(self, records: Sequence[Record]) -> list[Stored | WriteFailure]:
        """Write several op records; return each one's outcome, in order.

        An operator's op (the admin token's) goes to the shared op topic, which only the
        engine's principal may write in the per-group layout.
        """
        return self._send_each(
            [self.layout.op if _header(r, fmt.OPERATOR) is not None
             else self._topic(self.layout.op_topic, r) for r in records],
            records,
        )  # fmt: skip

    def _topic(self, topic_of: Callable[[str], str], record: Record) -> str:
        """Return the topic of `record`'s group, created first in the per-group layout."""
        group = _header(record, fmt.PRODUCER_GROUP) or ""
        topic = topic_of(group)  # ValueError: a name no group topic can hold (checked before)
        if self.layout.per_group and group not in self._groups_ready:
            if self._ensure_group_topics is not None:
                self._ensure_group_topics(group)
            self._groups_ready.add(group)
        return topic

    def close(self) -> None:
        """Flush and close the producer, if one was made."""
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(timeout=10)

    def _producer_or_new(self) -> Any:
        with self._lock:
            if self._producer is None:
                ack_ms = int(self.ack_timeout.total_seconds() * 1000)
                watch = AuthenticationWatch(self.bootstrap_servers, self.security)
                try:
                    with watch:
                        self._producer = KafkaProducer(
                            bootstrap_servers=self.bootstrap_servers,
                            client_id=self.client_id,
                            acks="all",
                            enable_idempotence=True,
                            linger_ms=1,
                            # A record is the body plus headers: as large as the topics allow.
                            max_request_size=self.max_message_size + HEADER_ALLOWANCE_BYTES,
                            request_timeout_ms=min(ack_ms, 10_000),
                            delivery_timeout_ms=ack_ms,
                            max_block_ms=min(ack_ms, 10_000),
                            # While Kafka is down a request gets its 503 in seconds, not 30 s.
                            bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                            **kafka_python_options(self.security),
                        )
                except kafka_errors.KafkaError as exc:
                    raise KafkaUnavailableError(
                        f"Kafka at {self.bootstrap_servers} cannot be reached: {exc}{watch.hint}"
                    ) from exc
            return self._producer

    def _discard(self, producer: Any) -> None:
        """Drop `producer` after a fatal error; the next request makes a new one."""
        with self._lock:
            if self._producer is producer:
                self._producer = None
        try:
            producer.close(timeout=0)
        except Exception:  # closing a broken producer is best effort
            log.debug("closing a failed producer", exc_info=True)

    @staticmethod
    def _failure(topic: str, exc: Exception) -> WriteFailure:
        """Return what `exc` means for one record."""
        if isinstance(exc, _TOO_LARGE):
            return RecordTooLargeError(f"the broker refused the record as too large: {exc}")
        return KafkaUnavailableError(f"Kafka did not acknowledge the write to {topic}: {exc}")

    def _send_each(
        self, topics: Sequence[str], records: Sequence[Record]
    ) -> list[Stored | WriteFailure]:
        """Send every record to its topic, then wait for each acknowledgement, in order.

        Raises KafkaUnavailableError only when no producer can be made (nothing was sent).
        Once a send fails before reaching the producer's buffer, the rest are not tried:
        they would fail alike, each after max_block_ms.
        """
        producer = self._producer_or_new()
        wait = self.ack_timeout.total_seconds() + 5
        pending: list[Any] = []
        failed: WriteFailure | None = None
        fatal = False
        for topic, r in zip(topics, records, strict=True):
            if failed is None:
                try:
                    pending.append(
                        producer.send(topic, key=r.key, value=r.value, headers=r.headers)
                    )
                    continue
                except kafka_errors.KafkaError as exc:
                    fatal = fatal or not exc.retriable
                    failed = self._failure(topic, exc)
            pending.append(failed)
        outcomes: list[Stored | WriteFailure] = []
        for topic, future in zip(topics, pending, strict=True):
            if isinstance(future, KafkaUnavailableError | RecordTooLargeError):
                outcomes.append(future)
                continue
            try:
                md = future.get(timeout=wait)
            except kafka_errors.KafkaError as exc:
                fatal = fatal or not exc.retriable
                outcomes.append(self._failure(topic, exc))
            else:
                outcomes.append(Stored(md.partition, md.offset, md.timestamp))
        if fatal:
            # Fatal for an idempotent producer, too-large included (kafka-python then aborts
            # every later batch with that error): the next request gets a new producer. Only
            # now, once every record of this call has its outcome.
            self._discard(producer)
        return outcomes


def _header(record: Record, name: str) -> str | None:
    """Return header `name` of `record` as text, or None if absent."""
    return next((value.decode() for key, value in record.headers if key == name), None)


def _stored_or_raise(outcome: Stored | WriteFailure) -> Stored:
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
