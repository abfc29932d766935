"""The consumer groups' offsets topics: created compacted, never by a client's first write.

A consumer group's committed offsets (coordinator/sdk/consumer/offset_store.py) are kept for
ever, the newest per key, so the topic is compacted. A broker that creates topics on first use
would make one with its own defaults (deleted after 7 days, say), so no client creates it by
writing to it. The shared layout's one topic is the engine's, made at its start
(streams/kafka_io/delivery_notices.py). In the per-group layout (coordinator/core/topics.py) each
consumer group has its own, made by `txcoord provision --consumer-group` or, for its REST
consumers, by the REST ingress (coordinator/rest/consumers.py); an SDK consumer only uses it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coordinator.kafka_clients.admin import ensure_configured_topic, ensure_topic

if TYPE_CHECKING:
    from coordinator.core.config import KafkaConfig

__all__ = ["OFFSETS_TOPIC_CONFIG", "ensure_offsets_topic"]

#: Offsets are kept for ever (the newest per key); compaction drops the older ones. It cleans
#: closed segments only: a segment closed every 10 minutes (not Kafka's 7 days) keeps what a
#: member reads at each rebalance to its group's newest offsets, about.
OFFSETS_TOPIC_CONFIG = {"cleanup.policy": "compact", "retention.ms": "-1", "segment.ms": "600000"}


def ensure_offsets_topic(kafka: KafkaConfig, consumer_group: str | None = None) -> str:
    """Create an offsets topic unless it exists; return its name.

    In the per-group layout and with `consumer_group`, that group's own (one partition: a
    group's records all go to one anyway); otherwise the shared one, partitioned as
    `[kafka] partitions` says. Raises ValueError for a consumer group whose name no topic
    can hold (coordinator/core/topics.py `consumer_group_topic_problem`).
    """
    layout = kafka.layout
    if not (layout.per_group and consumer_group is not None):
        ensure_configured_topic(kafka, layout.offsets, OFFSETS_TOPIC_CONFIG)
        return layout.offsets
    name = layout.offsets_topic(consumer_group)
    ensure_topic(
        kafka.bootstrap_servers,
        name,
        1,
        {"min.insync.replicas": str(kafka.min_insync_replicas), **OFFSETS_TOPIC_CONFIG},
        security=kafka.security,
        replication_factor=kafka.replication_factor,
    )
    return name
