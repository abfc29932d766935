"""The coordinator's check requests, published on the check topics (at least once).

Each CHECK row of a batch becomes a record on its group's check topic (the shared one, or
the group's own in the per-group layout, coordinator/core/topics.py), acknowledged by every in-sync
replica before the batch ends. A replayed batch publishes its checks again, with the same
transaction id and check number, which the SDK ignores. A check record too large to publish
goes out slim instead of failing the batch for ever (streams/kafka_io/check_topic.py).

A batch's checks go out in one Kafka transaction, committed before the batch ends, by a
producer whose transactional id every coordinator of the warehouse shares: a newer
coordinator's start fences an older one's producer, and what the older one sent after that
is aborted, never read (streams/kafka_io/kafka_fence.py; the readers read committed only). A
producer fenced so does not come back: its batch fails with WriterFencedError once the warehouse
shows the newer claim.

The producer is librdkafka's (coordinator/kafka_clients/producer.py): its sends and acknowledgements
run in C threads, beside the batch's Delta writes, instead of kafka-python's sender thread competing
with them for the driver's interpreter.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from coordinator.core.config import Config
from coordinator.core.errors import RecordTooLargeError, WriterFencedError
from coordinator.core.failpoints import failpoint
from coordinator.core.topics import (
    CHECKS_TRANSACTIONAL_PREFIX,
    group_topic_problem,
    transactional_id,
)
from coordinator.kafka_clients.producer import Stored, durable_config
from coordinator.protocol.check_record import Record
from streams.kafka_io.check_topic import (
    check_record_limit,
    check_topic_max_bytes,
    ensure_check_topic,
    publishable_record,
    slim_check_record,
)
from streams.kafka_io.kafka_fence import FencedProducer, FencedSender, transactional

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

#: Transactions tried (each failure but a fence: with a fresh producer) before a batch's check
#: requests are given up (and the batch fails).
PUBLISH_ATTEMPTS = 3
#: How long one record may wait for its acknowledgement.
ACK_TIMEOUT_SECONDS = 30
#: How long a new producer may take to reach the cluster (a broker restarting, say): each
#: of the PUBLISH_ATTEMPTS waits this long before the batch fails.
CONNECT_TIMEOUT_MS = 30_000

#: Check records that were not acknowledged: (row, record, error).
Failures = list[tuple[Any, Record, Exception]]


class CheckPublisher(FencedSender):
    """Publish a batch's CHECK rows to their groups' check topics."""

    def __init__(self, config: Config) -> None:
        self.config = config
        kafka = config.kafka
        settings = durable_config(
            kafka.bootstrap_servers,
            kafka.security,
            client_id="txcoord-coordinator-checks",
            # A check carries a body of up to max_message_size (streams/kafka_io/check_topic.py).
            max_record_bytes=check_topic_max_bytes(config.max_message_size),
            ack_timeout_ms=ACK_TIMEOUT_SECONDS * 1000,
            linger_ms=5,
        )
        self._producer = FencedProducer(
            transactional(
                settings, transactional_id(CHECKS_TRANSACTIONAL_PREFIX, config.warehouse)
            ),
            kafka.security,
            name="coordinator-checks",
            log=log,
            connect_timeout_ms=CONNECT_TIMEOUT_MS,
        )
        # The per-group check topics known to exist (coordinator/core/topics.py).
        self._check_topics: set[str] = set()

    def send(self, rows: pa.Table, batch_id: int) -> None:
        """Publish the check rows `rows` of batch `batch_id` (retrying with fresh producers)."""
        limit = check_record_limit(self.config.max_message_size)
        records = [(row, publishable_record(row, limit)) for row in rows.to_pylist()]
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                self.publish(records)
                break
            except WriterFencedError:
                raise  # a newer coordinator publishes now: never take its producer's id back
            except Exception as exc:
                self.close()
                if attempt == PUBLISH_ATTEMPTS:
                    raise  # the batch fails and is replayed; checks are at least once
                log.warning("batch %d: publishing checks failed (%s); retrying", batch_id, exc)
        failpoint("coordinator.after_check_topic")
        log.info("batch %d: %d check request(s) sent", batch_id, len(records))

    def publish(self, records: list[tuple[Any, Record]]) -> None:
        """Publish every (row, record) in one transaction; one Kafka refuses as too large
        goes out slim."""
        too_large, failed = self._send_all(records)
        if not too_large:
            for _, _, error in failed:
                raise error
            return
        # The transaction was aborted. Kafka fails the records batched with a refused one
        # alike: try each refused one again alone (its own transaction, committed if it
        # fits), and slim only one refused on its own; then the rest together (a rare
        # path: the topic is smaller than streams/kafka_io/check_topic.py sized it).
        for row, record, _ in too_large:
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
        refused = {id(record) for _, record, _ in too_large}
        rest = [(row, record) for row, record in records if id(record) not in refused]
        rest_large, rest_failed = self._send_all(rest)
        for _, _, error in rest_large + rest_failed:
            raise error

    def close(self) -> None:
        """Release the producer."""
        self._producer.close()

    def _send_all(self, records: list[tuple[Any, Record]]) -> tuple[Failures, Failures]:
        """Send `records` in one transaction; return those refused as too large, and others
        that failed (any failure aborts the transaction)."""
        if not records:
            return [], []
        topics = [self._check_topic(row["producer_group"]) for row, _ in records]
        outcomes = self._producer.send(
            topics, [record for _, record in records], ACK_TIMEOUT_SECONDS + 5
        )
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
