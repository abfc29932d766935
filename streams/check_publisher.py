"""The coordinator's check requests, published on the check topics (at least once).

Each CHECK row of a batch becomes a record on its group's check topic (the shared one, or
the group's own in the per-group layout, coordinator/core/topics.py), acknowledged by every in-sync
replica before the batch ends. A replayed batch publishes its checks again, with the same
transaction id and check number, which the SDK ignores. A check record too large to publish
goes out slim instead of failing the batch for ever (streams/check_topic.py).

The producer is librdkafka's (coordinator/kafka_clients/producer.py): its sends and acknowledgements
run in C threads, beside the batch's Delta writes, instead of kafka-python's sender thread competing
with them for the driver's interpreter.
"""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from coordinator.core.config import Config
from coordinator.core.errors import RecordTooLargeError
from coordinator.core.failpoints import failpoint
from coordinator.core.topics import group_topic_problem
from coordinator.kafka_clients.producer import Client, Stored, connect, durable_config, send_each
from coordinator.protocol.check_record import Record
from streams.check_topic import (
    check_record_limit,
    check_topic_max_bytes,
    ensure_check_topic,
    publishable_record,
    slim_check_record,
)

log = logging.getLogger(__name__)

#: Fresh producers tried before a batch's check requests are given up (and the batch fails).
PUBLISH_ATTEMPTS = 3
#: How long one record may wait for its acknowledgement.
ACK_TIMEOUT_SECONDS = 30
#: How long a new producer may take to reach the cluster (a broker restarting, say): each
#: of the PUBLISH_ATTEMPTS waits this long before the batch fails.
CONNECT_TIMEOUT_MS = 30_000

#: Check records that were not acknowledged: (row, record, error).
Failures = list[tuple[Any, Record, Exception]]


class CheckPublisher:
    """Publish a batch's CHECK rows to their groups' check topics."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._client: Client | None = None
        # The per-group check topics known to exist (coordinator/core/topics.py).
        self._check_topics: set[str] = set()

    def connect(self) -> None:
        """Reach the cluster now, so that a batch's first checks do not wait for it."""
        self._connected()

    def send(self, rows: pa.Table, batch_id: int) -> None:
        """Publish the check rows `rows` of batch `batch_id` (retrying with fresh producers)."""
        limit = check_record_limit(self.config.max_message_size)
        records = [(row, publishable_record(row, limit)) for row in rows.to_pylist()]
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                self.publish(records)
                break
            except Exception as exc:
                self.close()
                if attempt == PUBLISH_ATTEMPTS:
                    raise  # the batch fails and is replayed; checks are at least once
                log.warning("batch %d: publishing checks failed (%s); retrying", batch_id, exc)
        failpoint("coordinator.after_check_topic")
        log.info("batch %d: %d check request(s) sent", batch_id, len(records))

    def publish(self, records: list[tuple[Any, Record]]) -> None:
        """Publish every (row, record); one Kafka refuses as too large goes out slim."""
        too_large, failed = self._send_all(records)
        if not too_large:
            for _, _, error in failed:
                raise error
            return
        # An idempotent producer may fail the records in flight with a refused one: try
        # each again alone, and slim only one refused on its own (a rare path: the topic is
        # smaller than streams/check_topic.py sized it).
        for row, record, _ in [*too_large, *failed]:
            alone_large, alone_failed = self._send_all([(row, record)])
            for _, _, error in alone_failed:
                raise error
            if alone_large:
                error = alone_large[0][2]
                reason = f"Kafka refused the {len(record[1])}-byte check record: {error}"
                log.warning(
                    "check %s of %s/%s published without its message: %s",
                    row["check_number"],
                    row["producer_group"],
                    row["transaction_id"],
                    reason,
                )
                slim_large, slim_failed = self._send_all([(row, slim_check_record(row, reason))])
                for _, _, error in slim_large + slim_failed:
                    raise error

    def close(self) -> None:
        """Wait for what is in flight (10 s at most) and release the producer."""
        client, self._client = self._client, None
        if client is not None:
            client.close(timeout=10)

    def _send_all(self, records: list[tuple[Any, Record]]) -> tuple[Failures, Failures]:
        """Send `records` and wait for each; return those refused as too large, and others."""
        if not records:
            return [], []
        topics = [self._check_topic(row["producer_group"]) for row, _ in records]
        client = self._connected()
        outcomes = send_each(
            client, topics, [record for _, record in records], ACK_TIMEOUT_SECONDS + 5
        )
        if client.broken:
            self.close()
        too_large: Failures = []
        failed: Failures = []
        for (row, record), outcome in zip(records, outcomes, strict=True):
            if isinstance(outcome, RecordTooLargeError):
                too_large.append((row, record, outcome))
            elif not isinstance(outcome, Stored):
                failed.append((row, record, outcome))
        return too_large, failed

    def _check_topic(self, group: str) -> str:
        """Return the check topic of `group`, created first if the layout gives it its own.

        A group with no topics of its own (a name Kafka's topic names cannot hold, whose
        halves could only come from the engine's own principal) is checked on the shared
        check topic rather than failing the batch for ever.
        """
        layout = self.config.kafka.layout
        if not layout.per_group or group_topic_problem(group, layout):
            return layout.check
        topic = layout.check_topic(group)
        if topic not in self._check_topics:
            ensure_check_topic(self.config, topic)
            self._check_topics.add(topic)
        return topic

    def _connected(self) -> Client:
        """Return the producer, connecting one first if there is none."""
        if self._client is None:
            kafka = self.config.kafka
            self._client = connect(
                durable_config(
                    kafka.bootstrap_servers,
                    kafka.security,
                    client_id="txcoord-coordinator-checks",
                    # A check carries a body of up to max_message_size (streams/check_topic.py).
                    max_record_bytes=check_topic_max_bytes(self.config.max_message_size),
                    ack_timeout_ms=ACK_TIMEOUT_SECONDS * 1000,
                    linger_ms=5,
                ),
                kafka.security,
                name="coordinator-checks",
                log=log,
                timeout_ms=CONNECT_TIMEOUT_MS,
            )
        return self._client
