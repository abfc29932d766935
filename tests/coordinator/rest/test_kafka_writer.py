"""The REST's Kafka writer is idempotent: the broker tracks it as one producer, in sequence.

contract 7.7: a record the REST acknowledged is written once, and the producer's own retries
never duplicate or reorder it. The broker keeps producer state only for idempotent producers,
so its sequence numbers show the writer really runs with idempotence on (librdkafka's
idempotent producer against this broker; it replaced a smoke test of the library alone).
"""

from __future__ import annotations

import logging
import time

import pytest
from kafka import TopicPartition

from coordinator.core.errors import KafkaUnavailableError
from coordinator.core.topics import TopicLayout
from coordinator.kafka_clients.admin import admin_client, ensure_topic
from coordinator.protocol import ingress as fmt
from coordinator.rest.kafka_writer import BOOTSTRAP_TIMEOUT_MS, KafkaWriter, Stored
from coordinator.rest.records import Record

from .kafka_io import read_all

pytestmark = pytest.mark.kafka


def values_of(bootstrap_servers: str, partition: TopicPartition) -> list[bytes]:
    """Return every value of `partition`, oldest first: read up to its end offset, not
    until a silence (a loaded machine's first fetch can be slower than any silence)."""
    records = read_all(bootstrap_servers, partition.topic)
    return [
        r.value
        for r in sorted(records, key=lambda r: r.offset)
        if r.partition == partition.partition
    ]


def test_the_writer_writes_each_record_once_in_order_as_one_idempotent_producer(
    bootstrap_servers: str, kafka_topic: str
) -> None:
    layout = TopicLayout(half=kafka_topic, op=kafka_topic)
    writer = KafkaWriter(bootstrap_servers, layout, max_message_size=1 << 20)
    records = [Record(b"tx-1", str(i).encode(), [("txcoord-test", b"1")]) for i in range(200)]
    try:
        outcomes = writer.send_halves(records[:100]) + writer.send_ops(records[100:])
    finally:
        writer.close()
    assert all(isinstance(outcome, Stored) for outcome in outcomes), outcomes
    (where,) = {outcome.partition for outcome in outcomes if isinstance(outcome, Stored)}
    partition = TopicPartition(kafka_topic, where)

    assert values_of(bootstrap_servers, partition) == [str(i).encode() for i in range(200)]
    with admin_client(bootstrap_servers) as admin:
        described = admin.describe_producers([partition])
    (state,) = described.values()
    (producer,) = state.active_producers  # none at all without idempotence
    assert producer.producer_id >= 0
    assert producer.last_sequence == 199


def test_while_kafka_is_down_a_send_fails_in_seconds_and_logs_little(
    free_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """No broker at all: the 503's error within the bootstrap timeout, and a quiet log
    (librdkafka, asked for metadata, retries a refused connection every ~25 ms and logged
    each: ~190 error lines per request before the TCP check)."""
    caplog.set_level(logging.DEBUG)
    layout = TopicLayout(half="half", op="op")
    writer = KafkaWriter(f"127.0.0.1:{free_port}", layout, max_message_size=1024)
    started = time.monotonic()
    try:
        with pytest.raises(KafkaUnavailableError, match="cannot be reached"):
            writer.send_half(Record(b"tx-down", b"body", []))
    finally:
        writer.close()
    # It tries for the bootstrap timeout, then fails. Not for the ack timeout (30 s): a
    # librdkafka producer queues records silently until then. Above the bootstrap timeout a
    # loaded machine gets 15 s.
    bootstrap = BOOTSTRAP_TIMEOUT_MS / 1000
    assert bootstrap - 1 <= time.monotonic() - started < bootstrap + 15
    # The writer and its librdkafka producer log under `txcoord.`. Other loggers' lines are
    # another test's in this pytest worker process: py4j's as the garbage collector frees that
    # test's Java object proxies, kafka-python's from a client thread it left running (a CI run
    # counted 48 such DEBUG lines). librdkafka's own lines reach us as `txcoord.*.librdkafka`.
    ours = [r for r in caplog.records if r.name.startswith("txcoord")]
    assert len(ours) < 10, [r.getMessage() for r in ours]


def test_a_groups_topics_are_created_once_for_its_halves_and_ops(
    bootstrap_servers: str, kafka_topic: str
) -> None:
    """Per-group layout: the first record of a group creates its topics, half and op
    together; neither its ops nor its later halves ask again (an admin round trip each)."""
    layout = TopicLayout(half=f"{kafka_topic}-half", op=f"{kafka_topic}-op", per_group=True)
    asked: list[str] = []

    def ensure(topic: str) -> tuple[str, ...]:
        asked.append(topic)
        names = (layout.half_topic("g"), layout.op_topic("g"))
        for name in names:
            ensure_topic(bootstrap_servers, name)
        return names

    writer = KafkaWriter(bootstrap_servers, layout, max_message_size=1 << 20, ensure_topic=ensure)
    group = [(fmt.PRODUCER_GROUP, b"g")]
    try:
        outcomes = [
            *writer.send_halves([Record(b"tx-1", b"half", group)]),
            *writer.send_ops([Record(b"tx-1", b"op", group)]),
            *writer.send_halves([Record(b"tx-2", b"half", group)]),
        ]
    finally:
        writer.close()
    assert all(isinstance(outcome, Stored) for outcome in outcomes), outcomes
    assert asked == [layout.half_topic("g")]
