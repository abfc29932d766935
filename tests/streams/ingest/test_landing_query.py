"""The ingest stream against the real broker and real Delta tables."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable
from kafka import KafkaProducer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError
from coordinator.kafka_clients.admin import ensure_topic
from coordinator.protocol import ingress as fmt
from delta_tables import half_messages, op_records, quarantine
from delta_tables.registry import create_system_tables
from streams.ingest.landing_query import checkpoint_of, start_ingest
from streams.kafka_io.ingress_topics import ensure_ingress_topics, ingress_topic_problems
from streams.kafka_io.ticker import Ticker
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


def send_half(producer: KafkaProducer, config: Config, tx: str, **headers: bytes) -> None:
    base = {fmt.PRODUCER_GROUP: b"orders", fmt.TOPIC: b"OrderPaid", **headers}
    # A producer clock 20 years behind must not become the store time.
    producer.send(
        config.kafka.half_topic,
        key=tx.encode(),
        value=f"body-{tx}".encode(),
        headers=list(base.items()),
        timestamp_ms=946_684_800_000,
    )


def send_op(producer: KafkaProducer, config: Config, tx: str, op: bytes) -> None:
    producer.send(
        config.kafka.op_topic,
        key=tx.encode(),
        headers=[(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, op)],
    )


def drain(spark: SparkSession, config: Config) -> None:
    query = start_ingest(spark, config, available_now=True)
    try:
        query.awaitTermination(180)
    finally:
        query.stop()
    assert query.exception() is None


def counts(spark: SparkSession, config: Config) -> dict[str, int]:
    def rows(table: str, where: str = "true") -> int:
        return spark.read.format("delta").load(f"{config.warehouse}/{table}").where(where).count()

    return {
        "halves": rows("system/half_messages", "kind = 'HALF'"),
        "half_ticks": rows("system/half_messages", "kind = 'TICK'"),
        "ops": rows("system/op_records", "kind = 'OP'"),
        "op_ticks": rows("system/op_records", "kind = 'TICK'"),
        "quarantine": rows("system/quarantine"),
    }


def test_ingest_lands_each_record_once_in_its_table(spark: SparkSession, config: Config) -> None:
    ensure_ingress_topics(config)
    create_system_tables(spark, config.warehouse)
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, acks="all")
    before = datetime.utcnow() - timedelta(seconds=5)
    for i in range(5):
        send_half(producer, config, f"tx-{i}", **{fmt.KEYS: json.dumps([f"k{i}"]).encode()})
    for i in range(3):
        send_op(producer, config, f"tx-{i}", b"COMMIT")
    send_half(producer, config, "tx-bad", **{fmt.TOPIC: b"../escape"})
    send_op(producer, config, "tx-0", b"MAYBE")
    producer.flush()
    Ticker(
        config.kafka.bootstrap_servers,
        [config.kafka.half_topic, config.kafka.op_topic],
        timedelta(seconds=1),
    ).tick_once(producer)

    drain(spark, config)
    assert counts(spark, config) == {
        "halves": 5, "half_ticks": 1, "ops": 3, "op_ticks": 1, "quarantine": 2,
    }  # fmt: skip
    halves = spark.read.format("delta").load(half_messages.TABLE.path(config.warehouse))
    stored = halves.agg(F.min("stored_at").alias("lo"), F.max("stored_at").alias("hi")).first()
    assert stored is not None
    assert before <= stored.lo <= stored.hi <= datetime.utcnow() + timedelta(seconds=5)
    reasons = {
        r.reason
        for r in spark.read.format("delta").load(quarantine.TABLE.path(config.warehouse)).collect()
    }
    assert any("real topic must be" in r for r in reasons), reasons
    assert any("COMMIT, ROLLBACK, UNKNOWN or RESUME" in r for r in reasons), reasons

    # An independent reader sees the same rows.
    delta_rs = DeltaTable(op_records.TABLE.path(config.warehouse)).to_pyarrow_table().to_pylist()
    assert sorted(r["transaction_id"] for r in delta_rs if r["kind"] == "OP") == [
        "tx-0", "tx-1", "tx-2",
    ]  # fmt: skip

    # Nothing new: nothing written. New records: only they are appended.
    drain(spark, config)
    send_half(producer, config, "tx-5")
    producer.flush()
    producer.close()
    drain(spark, config)
    assert counts(spark, config)["halves"] == 6


def test_a_replayed_batch_writes_nothing_twice(spark: SparkSession, config: Config) -> None:
    ensure_ingress_topics(config)
    create_system_tables(spark, config.warehouse)
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, acks="all")
    for i in range(20):
        send_half(producer, config, f"tx-{i}")
        send_op(producer, config, f"tx-{i}", b"ROLLBACK")
    producer.flush()
    producer.close()
    drain(spark, config)
    landed = counts(spark, config)
    assert landed["halves"] == 20 and landed["ops"] == 20

    # Forget that the last batch committed, as a crash after the writes would: Spark replays
    # it with the same offsets, and every write must be skipped by Delta.
    commit_dir = Path(checkpoint_of(config), "commits")
    last = max(int(p.name) for p in commit_dir.iterdir() if p.name.isdigit())
    (commit_dir / str(last)).unlink()
    (commit_dir / f".{last}.crc").unlink(missing_ok=True)
    versions = DeltaTable(half_messages.TABLE.path(config.warehouse)).version()
    drain(spark, config)
    assert counts(spark, config) == landed
    assert DeltaTable(half_messages.TABLE.path(config.warehouse)).version() == versions


def test_an_ingress_topic_with_producer_time_is_refused(config: Config) -> None:
    ensure_topic(config.kafka.bootstrap_servers, config.kafka.half_topic, 1)  # CreateTime
    with pytest.raises(ConfigurationError, match="must use LogAppendTime"):
        ensure_ingress_topics(config)


def test_an_ingress_topic_that_keeps_records_too_briefly_is_refused(config: Config) -> None:
    """An engine stopped longer than the topic's retention would lose acknowledged records
    unread: a topic someone else made must keep them at least file_reserved_time."""
    brief = {"message.timestamp.type": "LogAppendTime", "retention.ms": "60000"}
    ensure_topic(config.kafka.bootstrap_servers, config.kafka.op_topic, 1, brief)
    with pytest.raises(ConfigurationError, match=r"retention\.ms.*file_reserved_time"):
        ensure_ingress_topics(config)


def test_what_an_existing_ingress_topic_is_checked_for(config: Config) -> None:
    good = {
        "message.timestamp.type": "LogAppendTime",
        "min.insync.replicas": "2",
        "retention.ms": "-1",  # for ever
    }
    strict = replace(config, kafka=replace(config.kafka, replication_factor=3,
                                           min_insync_replicas=2))  # fmt: skip
    assert ingress_topic_problems(strict, "t", good) == []
    assert ingress_topic_problems(strict, "t", {**good, "retention.ms": "259200000"}) == []
    (fewer,) = ingress_topic_problems(strict, "t", {**good, "min.insync.replicas": "1"})
    assert "min.insync.replicas=1" in fewer and "--add-config min.insync.replicas=2" in fewer
    (brief,) = ingress_topic_problems(strict, "t", {**good, "retention.ms": "259199999"})
    assert "retention.ms=518400000" in brief  # twice file_reserved_time, as created
    assert len(ingress_topic_problems(strict, "t", {"message.timestamp.type": "CreateTime"})) == 1


def test_the_ticker_reaches_every_partition(config: Config) -> None:
    ensure_ingress_topics(config)
    ticker = Ticker(
        config.kafka.bootstrap_servers, [config.kafka.half_topic], timedelta(milliseconds=200)
    ).start()
    deadline = time.monotonic() + 30
    while ticker.sent < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    ticker.stop()
    assert ticker.sent >= 4  # 2 partitions, at least twice
