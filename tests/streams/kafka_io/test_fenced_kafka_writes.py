"""contract 7.10 on Kafka: a fenced coordinator publishes no check or notice after the newer claim.

Two coordinators of one warehouse, each as a start makes it: it takes its producers'
transactional ids (Kafka first), then claims the writer epoch in the real warehouse
(streams/writes/writer_fence.py, local disk). The older one publishes again after the newer one's
claim, as a batch in flight would. A read_committed reader, as every reader of these topics
is (coordinator/kafka_clients/options.py COMMITTED_ONLY), must never see that record; the
older one must raise WriterFencedError and must not take its id back (which would fence
the newer one in turn): the newer one's producer keeps its epoch and publishes on.

Real broker, real Delta; the ids are the warehouse's own (streams/kafka_io/kafka_fence.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import CoordinatorNotAvailableError, TransactionalIdNotFoundError
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.core.errors import WriterFencedError
from coordinator.core.topics import (
    CHECKS_TRANSACTIONAL_PREFIX,
    NOTICES_TRANSACTIONAL_PREFIX,
    transactional_id,
)
from coordinator.kafka_clients.admin import admin_client, delete_topic
from coordinator.kafka_clients.options import COMMITTED_ONLY
from coordinator.protocol.deliveries import decode_notice
from streams.kafka_io.check_publisher import CheckPublisher
from streams.kafka_io.check_topic import check_record
from streams.kafka_io.delivery_notices import DeliveryNotices, ensure_consumer_topics
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from streams.kafka_io.kafka_fence import TRANSACTION_TIMEOUT_MS, transactional
from streams.writes.writer_fence import claim_epoch
from tests.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def check_row(tx: str) -> dict[str, Any]:
    """Return a CHECK row of the stateful stage, as the writer reads it."""
    return {
        "transaction_id": tx, "msg_id": f"m-{tx}", "producer_group": "orders",
        "topic": "OrderPaid", "queue_id": 0, "body": b"body", "keys": [tx], "tags": "t",
        "properties": {}, "check_number": 1, "prepared_ms": 1_800_000_000_000,
        "at_ms": 1_800_000_010_000,
    }  # fmt: skip


def committed(config: Config, topic: str) -> list[Any]:
    """Return every committed record of `topic`: each partition read up to its last stable
    offset as of now (the positive marker: whatever was committed before is below it)."""
    consumer = KafkaConsumer(
        bootstrap_servers=config.kafka.bootstrap_servers,
        enable_auto_commit=False,
        **COMMITTED_ONLY,
    )
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        ends = consumer.end_offsets(partitions)
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            assert time.monotonic() < deadline, f"{topic} not read up to {ends} in 30 s"
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def producer_epoch(config: Config, transactional: str) -> int | None:
    """Return the epoch the broker holds for `transactional` (bumped by every init), None if
    no producer ever took that id (nor, on a new broker, any transactional id)."""
    with admin_client(config.kafka.bootstrap_servers) as admin:
        try:
            described: Any = admin.describe_transactions([transactional])
        except (TransactionalIdNotFoundError, CoordinatorNotAvailableError):
            return None
    state = described[transactional]
    assert state.transaction_timeout_ms == TRANSACTION_TIMEOUT_MS  # set, not defaulted
    return int(state.producer_epoch)


def publish_check(publisher: CheckPublisher, tx: str) -> WriterFencedError | None:
    """Publish one check; return the WriterFencedError it raised, if any."""
    try:
        publisher.publish([(check_row(tx), check_record(check_row(tx)))])
    except WriterFencedError as exc:
        return exc
    return None


@pytest.fixture
def config(make_config: ConfigFactory) -> Iterator[Config]:
    made = make_config()
    ensure_ingress_topics(made)
    ensure_consumer_topics(made)
    try:
        yield made
    finally:
        kafka = made.kafka
        for topic in (kafka.half_topic, kafka.op_topic, kafka.check_topic):
            delete_topic(kafka.bootstrap_servers, topic)
        for topic in (kafka.deliveries_topic, kafka.consumer_offsets_topic):
            delete_topic(kafka.bootstrap_servers, topic)


def start(spark: SparkSession, config: Config, name: str, take: Callable[[], None]) -> Any:
    """Start coordinator `name` as the engine does: take the Kafka id, then claim."""
    take()
    return claim_epoch(spark, config.warehouse, f"txcoord-coordinator-{name}", f"ckpt-{name}")


def test_a_fenced_coordinators_checks_are_never_read(spark: SparkSession, config: Config) -> None:
    older, newer = CheckPublisher(config), CheckPublisher(config)
    taken = transactional_id(CHECKS_TRANSACTIONAL_PREFIX, config.warehouse)
    try:
        older.fence = start(spark, config, "older", older.connect)
        assert publish_check(older, "before") is None
        newer.fence = start(spark, config, "newer", newer.connect)
        epoch = producer_epoch(config, taken)
        # A batch in flight when the newer one started, and the next one's, had it gone on.
        fenced = [publish_check(older, "zombie"), publish_check(older, "zombie-2")]
        epoch_after = producer_epoch(config, taken)
        assert publish_check(newer, "after") is None
    finally:
        older.close()
        newer.close()
    records = committed(config, config.kafka.check_topic)
    read = [json.loads(r.value)["transaction_id"] for r in records]
    assert sorted(read) == ["after", "before"], f"a fenced coordinator's check was read: {read}"
    assert all(fenced), f"the fenced coordinator's batch went on: {fenced}"
    assert "ckpt-newer" in str(fenced[0])  # who took over
    assert epoch_after == epoch, "the fenced coordinator took its id back"


def test_a_fenced_coordinators_notices_are_never_read(spark: SparkSession, config: Config) -> None:
    older, newer = DeliveryNotices(config), DeliveryNotices(config)
    try:
        # The first notice takes the id (for the newer one: before its claim, as a start).
        older.fence = start(spark, config, "older", lambda: older.publish(1, {("T", 0): 1}))
        newer.fence = start(spark, config, "newer", lambda: newer.publish(1, {("T", 0): 2}))
        taken = transactional_id(NOTICES_TRANSACTIONAL_PREFIX, config.warehouse)
        epoch = producer_epoch(config, taken)
        fenced: WriterFencedError | None = None
        try:
            older.publish(2, {("T", 0): 99})  # the older one's batch in flight
        except WriterFencedError as exc:
            fenced = exc
        assert producer_epoch(config, taken) == epoch, "the older one took its id back"
        newer.publish(2, {("T", 0): 3})
        assert newer.missed == 0
    finally:
        older.close()
        newer.close()
    notices = [decode_notice(r.value) for r in committed(config, config.kafka.deliveries_topic)]
    ends = [q.next_offset for notice in notices if notice is not None for q in notice.queues]
    assert ends == [1, 2, 3], f"a fenced coordinator's notice was read: {ends}"
    assert fenced is not None, "the fenced coordinator's notice went out unrefused"


def test_a_transaction_left_open_is_aborted_by_the_newer_start(
    spark: SparkSession, config: Config
) -> None:
    """An older coordinator frozen (or killed) between sending a batch's checks and their
    commit: the newer one's start aborts them, and the older one's commit is refused."""
    taken = transactional_id(CHECKS_TRANSACTIONAL_PREFIX, config.warehouse)
    frozen = Producer(transactional({"bootstrap.servers": config.kafka.bootstrap_servers}, taken))
    frozen.init_transactions(30)
    frozen.begin_transaction()
    key, value, _ = check_record(check_row("zombie"))
    frozen.produce(config.kafka.check_topic, key=key, value=value)
    frozen.flush(30)  # in the log, not committed
    newer = CheckPublisher(config)
    try:
        newer.fence = start(spark, config, "newer", newer.connect)
        assert publish_check(newer, "after") is None
        try:
            frozen.commit_transaction(30)
            refused = None
        except KafkaException as exc:
            refused = exc.args[0]
    finally:
        newer.close()
    records = committed(config, config.kafka.check_topic)
    read = [json.loads(r.value)["transaction_id"] for r in records]
    assert read == ["after"], f"a transaction left open by a fenced coordinator was read: {read}"
    assert refused is not None and refused.fatal(), "the fenced producer committed"
