"""One idempotent producer for every request: a record is acknowledged only once durable.

`acks=all` with idempotence (contract 7.7): a 201/202 is sent after the broker has written the
record to every in-sync replica, and the producer's own retries never duplicate or reorder
it. A batch is answered record by record (`send_halves`, `send_ops`): each record's outcome
is its own broker acknowledgement or failure, so the caller can say exactly which records
are durable.

The producer is librdkafka's (confluent-kafka), shared with the coordinator's check publisher
(coordinator/kafka_clients/producer.py): kafka-python's pure-Python producer was 40% of the REST
ingress's CPU under load (docs/performance.md). One poller thread serves its delivery callbacks,
which settle each call's records; a request thread only waits. The producer is created on first use
and must reach the cluster within BOOTSTRAP_TIMEOUT_MS (librdkafka itself would queue records
silently until their delivery timeout), so the REST starts, and answers 503 in seconds while Kafka
is down, and recovers once it is back; a producer that failed for good is dropped and the next
request builds a new one. Records are partitioned by murmur2 of their key, as Kafka's Java client
and the SDK (kafka-python) do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import UNAUTHENTICATED_PRINCIPAL, TopicLayout
from coordinator.kafka_clients.producer import (
    BOOTSTRAP_TIMEOUT_MS,
    Client,
    Stored,
    WriteFailure,
    connect,
    durable_config,
    send_each,
)
from coordinator.protocol import ingress as fmt
from coordinator.protocol.ingress import HEADER_ALLOWANCE_BYTES
from coordinator.rest.records import Record

__all__ = ["BOOTSTRAP_TIMEOUT_MS", "KafkaWriter", "Stored", "WriteFailure"]

log = logging.getLogger("txcoord.rest.kafka")


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
        principal: str = UNAUTHENTICATED_PRINCIPAL,
        ensure_topic: Callable[[str], Iterable[str]] | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security or KafkaSecurity()
        #: Where each record goes: the shared topics, or its group's own
        #: (coordinator/core/topics.py).
        self.layout = layout
        #: Where an operator's op (the admin token's) goes: the shared op topic, or in the
        #: per-group layout the operator topic of this writer's own Kafka principal, the one
        #: topic besides the shared ones on which the ingest trusts the operator header.
        self.operator_topic = layout.operator_topic(principal)
        # Creates a group's or the operator topic before its first record (per-group
        # layout), if given.
        self._ensure_topic = ensure_topic
        self._topics_ready: set[str] = set()
        self.max_message_size = max_message_size
        self.ack_timeout = ack_timeout
        self.client_id = client_id
        self._lock = threading.Lock()
        self._client: Client | None = None

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

        An operator's op (the admin token's) goes to `operator_topic`.
        """
        return self._send_each(
            [
                self._ready(self.operator_topic)
                if _header(r, fmt.OPERATOR) is not None
                else self._topic(self.layout.op_topic, r)
                for r in records
            ],
            records,
        )

    def _topic(self, topic_of: Callable[[str], str], record: Record) -> str:
        """Return the topic of `record`'s group, created first in the per-group layout."""
        group = _header(record, fmt.PRODUCER_GROUP) or ""
        # ValueError: a name no group topic can hold (checked before)
        return self._ready(topic_of(group))

    def _ready(self, topic: str) -> str:
        """Return `topic`, created first if it is a per-group layout's own topic."""
        if self.layout.per_group and topic not in self._topics_ready:
            # A group's topics are created together: its op topic is ready with its half topic.
            if self._ensure_topic is not None:
                self._topics_ready.update(self._ensure_topic(topic))
            self._topics_ready.add(topic)
        return topic

    def close(self) -> None:
        """Flush and close the producer, if one was made."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close(timeout=10)

    def _config(self) -> dict[str, Any]:
        return durable_config(
            self.bootstrap_servers,
            self.security,
            client_id=self.client_id,
            # A record is the body plus headers: as large as the topics allow.
            max_record_bytes=self.max_message_size + HEADER_ALLOWANCE_BYTES,
            ack_timeout_ms=int(self.ack_timeout.total_seconds() * 1000),
            linger_ms=1,
        )

    def _client_or_new(self) -> Client:
        with self._lock:
            if self._client is not None and not self._client.broken:
                return self._client
            broken, self._client = self._client, None
            if broken is not None:
                broken.close(timeout=0)
            self._client = connect(self._config(), self.security, name="rest-kafka-acks", log=log)
            return self._client

    def _discard(self, client: Client) -> None:
        """Drop `client` after a fatal error; the next request makes a new one."""
        with self._lock:
            if self._client is client:
                self._client = None
        try:
            client.close(timeout=0)
        except Exception:  # closing a broken producer is best effort
            log.debug("closing a failed producer", exc_info=True)

    def _send_each(
        self, topics: Sequence[str], records: Sequence[Record]
    ) -> list[Stored | WriteFailure]:
        """Send every record to its topic, then wait for each acknowledgement, in order.

        Raises KafkaUnavailableError only when no producer can be made (nothing was sent).
        A record the producer refuses itself as too large fails alone; once a send fails
        otherwise, the rest are not tried (coordinator/kafka_clients/producer.send_each).
        """
        client = self._client_or_new()
        outcomes = send_each(
            client,
            topics,
            [(r.key, r.value, r.headers) for r in records],
            self.ack_timeout.total_seconds() + 5,
        )
        if client.broken:
            # Only now, once every record of this call has its outcome.
            self._discard(client)
        return outcomes


def _header(record: Record, name: str) -> str | None:
    """Return header `name` of `record` as text, or None if absent."""
    return next((value.decode() for key, value in record.headers if key == name), None)


def _stored_or_raise(outcome: Stored | WriteFailure) -> Stored:
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
