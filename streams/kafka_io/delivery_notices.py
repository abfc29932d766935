"""Delivery notices: after a batch delivered, its queues' new ends, for consumers (best effort).

Consumers (coordinator/sdk/consumer/) learn from these that new rows are readable, within a
batch of their commit, instead of polling the topic tables (coordinator/protocol/
deliveries.py has the format). A notice is sent once the batch's rows are in their topic
tables, beside the write of `system/queue_offsets`; a replayed batch sends it again (the
same ends). It is a hint, not a guarantee: if Kafka does not take it within
NOTICE_WAIT_SECONDS the batch goes on without it, and consumers see the rows at their next
look at `system/queue_offsets`. The checks, not the notices, are what a batch waits for.

Like the checks, notices are sent in Kafka transactions by a producer whose transactional id
every coordinator of the warehouse shares (its own id: notices go out beside the checks,
from another thread): a newer coordinator's start fences an older one's, whose notices
nobody reads then (streams/kafka_io/kafka_fence.py). Best effort ends there: a producer fenced by a
newer coordinator never takes the id back, and raises WriterFencedError, which stops the
batch (it is fenced in the warehouse too).

Also here: the two topics of the consumer side, created at the engine's start.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from coordinator.core.config import Config
from coordinator.core.errors import WriterFencedError
from coordinator.core.topics import NOTICES_TRANSACTIONAL_PREFIX, transactional_id
from coordinator.kafka_clients.admin import ensure_topic
from coordinator.kafka_clients.offsets_topic import ensure_offsets_topic
from coordinator.kafka_clients.producer import Stored, durable_config
from coordinator.protocol.check_record import Record
from coordinator.protocol.deliveries import QueueEnd, encode_notices
from streams.kafka_io.kafka_fence import FencedProducer, FencedSender, transactional

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)

#: How long a batch waits for its notice to be acknowledged before going on without it.
NOTICE_WAIT_SECONDS = 5.0
#: How long the deliveries topic keeps a notice: consumers read only new ones.
NOTICE_RETENTION_MS = 3_600_000
#: A notice record's largest size (coordinator/protocol/deliveries.py QUEUES_PER_NOTICE).
NOTICE_MAX_BYTES = 1_000_000


def ensure_consumer_topics(config: Config) -> None:
    """Create the deliveries topic (one partition: every consumer reads every notice, in
    order) and, in the shared layout, the consumer groups' offsets topic (compacted) if
    absent. In the per-group layout each consumer group has an offsets topic of its own,
    made for it (coordinator/kafka_clients/offsets_topic.py)."""
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
    if not kafka.topics_per_group:
        ensure_offsets_topic(kafka)


class DeliveryNotices(FencedSender):
    """Publish each delivering batch's queue ends on the deliveries topic."""

    def __init__(self, config: Config) -> None:
        self.config = config
        kafka = config.kafka
        settings = durable_config(
            kafka.bootstrap_servers,
            kafka.security,
            client_id="txcoord-coordinator-notices",
            max_record_bytes=NOTICE_MAX_BYTES,
            ack_timeout_ms=int(NOTICE_WAIT_SECONDS * 1000),
            linger_ms=0,
        )
        self._producer = FencedProducer(
            transactional(
                settings, transactional_id(NOTICES_TRANSACTIONAL_PREFIX, config.warehouse)
            ),
            kafka.security,
            name="coordinator-notices",
            log=log,
            connect_timeout_ms=int(NOTICE_WAIT_SECONDS * 1000),
            # A batch takes the id back after a failure: not for long (a hint).
            init_timeout_seconds=2 * NOTICE_WAIT_SECONDS,
        )
        #: Notices Kafka did not take (each logged): for the tests and the status.
        self.missed = 0

    def publish(self, batch_id: int, ends: Mapping[tuple[str, int], int]) -> None:
        """Announce that batch `batch_id` moved these (topic, queue) ends; raise only
        WriterFencedError (a newer coordinator took over)."""
        if not ends:
            return
        queues = [QueueEnd(topic, queue, end) for (topic, queue), end in ends.items()]
        records: list[Record] = [
            (b"", value, []) for value in encode_notices(batch_id, _now_ms(), queues)
        ]
        topic = self.config.kafka.deliveries_topic
        try:
            outcomes = self._producer.send([topic] * len(records), records, NOTICE_WAIT_SECONDS)
            failed: list[Exception] = [o for o in outcomes if not isinstance(o, Stored)]
        except WriterFencedError:
            raise  # never a notice after the newer coordinator's claim
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
        """Release the producer."""
        self._producer.close()


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
