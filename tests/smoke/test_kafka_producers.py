"""kafka-python's idempotent and transactional producers work against the local broker."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streams.kafka_topics import admin_client

pytestmark = pytest.mark.kafka


def consume_all(bootstrap_servers: str, topic: str, isolation: str) -> list[bytes]:
    """Return every value of partition 0 of `topic` visible under `isolation`."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        isolation_level=isolation,
        enable_auto_commit=False,
        consumer_timeout_ms=3000,
    )
    partition = TopicPartition(topic, 0)
    try:
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        return [record.value for record in consumer]
    finally:
        consumer.close()


def test_idempotent_producer_writes_each_record_once_in_order(
    bootstrap_servers: str, kafka_topic: str
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers, enable_idempotence=True, acks="all"
    )
    try:
        for i in range(200):
            producer.send(kafka_topic, value=str(i).encode(), partition=0)
        producer.flush(30)
    finally:
        producer.close()

    values = consume_all(bootstrap_servers, kafka_topic, "read_uncommitted")
    assert values == [str(i).encode() for i in range(200)]
    with admin_client(bootstrap_servers) as admin:
        described = admin.describe_producers([TopicPartition(kafka_topic, 0)])
    # The broker tracked one producer id whose sequence numbers ran 0..199: idempotence was on.
    (state,) = described.values()
    (producer,) = state.active_producers
    assert producer.producer_id >= 0
    assert producer.last_sequence == 199


def test_read_committed_consumer_sees_only_committed_records(
    bootstrap_servers: str, kafka_topic: str
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers, transactional_id=f"tx-{kafka_topic}"
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(3):
            producer.send(kafka_topic, value=f"committed-{i}".encode(), partition=0)
        producer.commit_transaction()

        producer.begin_transaction()
        for i in range(2):
            producer.send(kafka_topic, value=f"aborted-{i}".encode(), partition=0)
        producer.flush()
        producer.abort_transaction()

        producer.begin_transaction()
        producer.send(kafka_topic, value=b"committed-3", partition=0)
        producer.commit_transaction()
    finally:
        producer.close()

    committed = consume_all(bootstrap_servers, kafka_topic, "read_committed")
    everything = consume_all(bootstrap_servers, kafka_topic, "read_uncommitted")
    assert committed == [b"committed-0", b"committed-1", b"committed-2", b"committed-3"]
    assert sorted(everything) == sorted([*committed, b"aborted-0", b"aborted-1"])
