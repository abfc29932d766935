"""Create and delete Kafka topics: the few admin calls the product and its tests need.

Every call takes the cluster's security settings (coordinator/core/kafka_security.py); None is
the open plaintext default. `ensure_topic` takes the replication of a real cluster
(`[kafka] replication_factor`, `min_insync_replicas`: contract 7.7's acks=all means that many
copies); `ensure_configured_topic` applies all of `[kafka]` at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from coordinator.core.kafka_security import KafkaSecurity
from coordinator.kafka_clients.options import kafka_python_options

if TYPE_CHECKING:
    from coordinator.core.config import KafkaConfig


@contextlib.contextmanager
def admin_client(
    bootstrap_servers: str,
    client_id: str = "txcoord-admin",
    security: KafkaSecurity | None = None,
) -> Iterator[Any]:
    """Yield a connected admin client and close it afterwards."""
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap_servers,
        client_id=client_id,
        request_timeout_ms=15000,
        **kafka_python_options(security),
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
    *,
    security: KafkaSecurity | None = None,
    replication_factor: int = 1,
) -> bool:
    """Create topic `name` unless it exists; return True if this call created it."""
    topic = NewTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        topic_configs=dict(config or {}),
    )
    with admin_client(bootstrap_servers, security=security) as admin:
        try:
            admin.create_topics([topic], wait_for_metadata=True)
        except TopicAlreadyExistsError:
            return False
        return True


def ensure_configured_topic(kafka: KafkaConfig, name: str, config: Mapping[str, str]) -> bool:
    """Create topic `name` of the product unless it exists, replicated as `[kafka]` says."""
    settings = {"min.insync.replicas": str(kafka.min_insync_replicas), **config}
    return ensure_topic(
        kafka.bootstrap_servers,
        name,
        kafka.partitions,
        settings,
        security=kafka.security,
        replication_factor=kafka.replication_factor,
    )


def delete_topic(bootstrap_servers: str, name: str, security: KafkaSecurity | None = None) -> bool:
    """Delete topic `name`; return False if it did not exist."""
    with admin_client(bootstrap_servers, security=security) as admin:
        try:
            admin.delete_topics([name])
        except UnknownTopicOrPartitionError:
            return False
        return True
