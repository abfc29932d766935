"""Fixtures of the SDK's Kafka tests: uuid-named ingress and check topics per test."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordinator.core.topics import check_consumer_group
from coordinator.kafka_clients.admin import admin_client, delete_topic, ensure_topic
from coordinator.sdk import TransactionListener, TransactionProducer

# The ingress topics' one setting the protocol depends on (streams/kafka_io/ingress_topics.py).
INGRESS_TOPIC_CONFIG = {"message.timestamp.type": "LogAppendTime"}


@dataclass(frozen=True)
class SdkTopics:
    """A test's own half, op and check topics, and its own producer group."""

    bootstrap_servers: str
    half: str
    op: str
    check: str
    group: str


@pytest.fixture
def sdk_topics(bootstrap_servers: str) -> Iterator[SdkTopics]:
    """Create 2-partition half/op/check topics named after a uuid; delete them after."""
    suffix = uuid.uuid4().hex[:10]
    topics = SdkTopics(
        bootstrap_servers, f"half-{suffix}", f"op-{suffix}", f"check-{suffix}", f"orders-{suffix}"
    )
    ensure_topic(bootstrap_servers, topics.half, 2, INGRESS_TOPIC_CONFIG)
    ensure_topic(bootstrap_servers, topics.op, 2, INGRESS_TOPIC_CONFIG)
    ensure_topic(bootstrap_servers, topics.check, 2)
    try:
        yield topics
    finally:
        for name in (topics.half, topics.op, topics.check):
            delete_topic(bootstrap_servers, name)


ProducerFactory = Callable[..., TransactionProducer]


@pytest.fixture
def make_producer(sdk_topics: SdkTopics) -> Iterator[ProducerFactory]:
    """Return a factory of started Kafka producers of the test's group; shut down after."""
    made: list[TransactionProducer] = []

    def make(listener: TransactionListener, **options: Any) -> TransactionProducer:
        settings: dict[str, Any] = {"group": sdk_topics.group, "poll_wait_seconds": 0.2, **options}
        producer = TransactionProducer(
            listener=listener,
            bootstrap_servers=sdk_topics.bootstrap_servers,
            half_topic=sdk_topics.half,
            op_topic=sdk_topics.op,
            check_topic=sdk_topics.check,
            **settings,
        )
        made.append(producer)
        producer.start()
        return producer

    yield make
    for producer in made:
        producer.shutdown(timeout=1)


def read_records(
    bootstrap_servers: str, topic: str, count: int, timeout: float = 30.0, settle: float = 1.0
) -> list[Any]:
    """Return every record of `topic` once `count` are there and `settle` s brought no more."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        quiet_until = time.monotonic() + settle
        while time.monotonic() < quiet_until:
            for batch in consumer.poll(timeout_ms=100).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def publish(
    bootstrap_servers: str,
    topic: str,
    records: list[tuple[bytes, bytes, Any]],
    partition: int | None = None,
) -> None:
    """Write (key, value, headers) records (to `partition`, or by key) and wait for the
    broker's acknowledgement."""
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    try:
        for key, value, headers in records:
            producer.send(topic, key=key, value=value, headers=headers, partition=partition)
        producer.flush(30)
    finally:
        producer.close()


def committed_offsets(bootstrap_servers: str, group: str) -> dict[int, int]:
    """Return {partition: committed offset} of the SDK's check consumer group for `group`."""
    with admin_client(bootstrap_servers) as admin:
        offsets = admin.list_group_offsets(check_consumer_group(group))
    (by_partition,) = offsets.values()
    return {tp.partition: meta.offset for tp, meta in by_partition.items()}


def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """Return {partition: end offset} of the partitions of `topic` that hold records."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        ends = consumer.end_offsets(partitions)
        return {tp.partition: offset for tp, offset in ends.items() if offset > 0}
    finally:
        consumer.close()


def group_members(bootstrap_servers: str, group: str) -> int:
    """Return how many members hold partitions in the SDK's check consumer group."""
    with admin_client(bootstrap_servers) as admin:
        described = admin.describe_groups([check_consumer_group(group)])
    (info,) = described.values()
    if info.get("group_state") != "Stable":
        return 0
    return sum(1 for m in info.get("members", []) if m.get("member_assignment"))
