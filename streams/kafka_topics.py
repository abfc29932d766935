"""Create and delete Kafka topics: the few admin calls the product and its tests need."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError


@contextlib.contextmanager
def admin_client(bootstrap_servers: str, client_id: str = "txcoord-admin") -> Iterator[Any]:
    """Yield a connected admin client and close it afterwards."""
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap_servers, client_id=client_id, request_timeout_ms=15000
    )
    try:
        yield admin
    finally:
        admin.close()


def ensure_topic(
    bootstrap_servers: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
) -> bool:
    """Create topic `name` unless it exists; return True if this call created it."""
    topic = NewTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        topic_configs=dict(config or {}),
    )
    with admin_client(bootstrap_servers) as admin:
        try:
            admin.create_topics([topic], wait_for_metadata=True)
        except TopicAlreadyExistsError:
            return False
        return True


def delete_topic(bootstrap_servers: str, name: str) -> bool:
    """Delete topic `name`; return False if it did not exist."""
    with admin_client(bootstrap_servers) as admin:
        try:
            admin.delete_topics([name])
        except UnknownTopicOrPartitionError:
            return False
        return True
