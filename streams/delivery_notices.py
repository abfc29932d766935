"""Delivery notices: after a batch delivered, its queues' new ends, for consumers (best effort).

Consumers (coordinator/sdk/consumer/) learn from these that new rows are readable, within a
batch of their commit, instead of polling the topic tables (coordinator/protocol/
deliveries.py has the format). A notice is sent once the batch's rows are in their topic
tables, beside the write of `system/queue_offsets`; a replayed batch sends it again (the
same ends). It is a hint, not a guarantee: if Kafka does not take it within
NOTICE_WAIT_SECONDS the batch goes on without it, and consumers see the rows at their next
look at `system/queue_offsets`. The checks, not the notices, are what a batch waits for.

Also here: the two topics of the consumer side, created at the engine's start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from coordinator.core.config import Config
from coordinator.kafka_clients.admin import ensure_configured_topic, ensure_topic
from coordinator.kafka_clients.producer import Client, Stored, connect, durable_config, send_each
from coordinator.protocol.check_record import Record
from coordinator.protocol.deliveries import QueueEnd, encode_notices

log = logging.getLogger(__name__)

#: How long a batch waits for its notice to be acknowledged before going on without it.
NOTICE_WAIT_SECONDS = 5.0
#: How long the deliveries topic keeps a notice: consumers read only new ones.
NOTICE_RETENTION_MS = 3_600_000
#: A notice record's largest size (coordinator/protocol/deliveries.py QUEUES_PER_NOTICE).
NOTICE_MAX_BYTES = 1_000_000


def ensure_consumer_topics(config: Config) -> None:
    """Create the deliveries topic (one partition: every consumer reads every notice, in
    order) and the consumer groups' offsets topic (compacted) if absent."""
    kafka = config.kafka
    ensure_topic(
        kafka.bootstrap_servers,
        kafka.deliveries_topic,
        1,
        {
            "retention.ms": str(NOTICE_RETENTION_MS),
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": str(kafka.min_insync_replicas),
        },
        security=kafka.security,
        replication_factor=kafka.replication_factor,
    )
    # Offsets are kept for ever (the newest per key); compaction drops the older ones. It
    # cleans closed segments only: a segment closed every 10 minutes (not Kafka's 7 days)
    # keeps what a member reads at each rebalance to its group's newest offsets, about.
    ensure_configured_topic(
        kafka,
        kafka.consumer_offsets_topic,
        {"cleanup.policy": "compact", "retention.ms": "-1", "segment.ms": "600000"},
    )


class DeliveryNotices:
    """Publish each delivering batch's queue ends on the deliveries topic."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._client: Client | None = None
        #: Notices Kafka did not take (each logged): for the tests and the status.
        self.missed = 0

    def publish(self, batch_id: int, ends: Mapping[tuple[str, int], int]) -> None:
        """Announce that batch `batch_id` moved these (topic, queue) ends; never raise."""
        if not ends:
            return
        queues = [QueueEnd(topic, queue, end) for (topic, queue), end in ends.items()]
        records: list[Record] = [
            (b"", value, []) for value in encode_notices(batch_id, _now_ms(), queues)
        ]
        topic = self.config.kafka.deliveries_topic
        try:
            client = self._connected()
            outcomes = send_each(client, [topic] * len(records), records, NOTICE_WAIT_SECONDS)
            failed: list[Exception] = [o for o in outcomes if not isinstance(o, Stored)]
            if client.broken:
                self.close()
        except Exception as exc:  # a hint: the batch goes on (module docstring)
            failed = [exc]
            self.close()
        if failed:
            self.missed += 1
            log.warning(
                "batch %d: delivery notice not published (%s); consumers see its rows at "
                "their next look at the queue offsets",
                batch_id,
                failed[0],
            )

    def close(self) -> None:
        """Release the producer (waiting 5 s at most for what is in flight)."""
        client, self._client = self._client, None
        if client is not None:
            client.close(timeout=5)

    def _connected(self) -> Client:
        if self._client is None:
            kafka = self.config.kafka
            self._client = connect(
                durable_config(
                    kafka.bootstrap_servers,
                    kafka.security,
                    client_id="txcoord-coordinator-notices",
                    max_record_bytes=NOTICE_MAX_BYTES,
                    ack_timeout_ms=int(NOTICE_WAIT_SECONDS * 1000),
                    linger_ms=0,
                ),
                kafka.security,
                name="coordinator-notices",
                log=log,
                timeout_ms=int(NOTICE_WAIT_SECONDS * 1000),
            )
        return self._client


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
