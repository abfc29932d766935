"""Spark reads a Kafka topic through the Kafka connector and writes Delta, exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest
from chispa import assert_df_equality
from kafka import KafkaProducer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def produce(bootstrap_servers: str, topic: str, ids: range) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    try:
        for i in ids:
            producer.send(
                topic,
                key=f"tx-{i}".encode(),
                value=f"body-{i}".encode(),
                headers=[("real_topic", b"OrderPaid"), ("queue_id", str(i % 4).encode())],
            )
        producer.flush(30)
    finally:
        producer.close()


def ingest(spark: SparkSession, bootstrap_servers: str, topic: str, target: Path, cp: Path) -> None:
    """Run one availableNow Kafka -> Delta stream."""
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    rows = records.select(
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
        F.expr("filter(headers, h -> h.key = 'queue_id')[0].value").cast("string").alias("queue"),
        "partition",
        "offset",
    )
    query = (
        rows.writeStream.format("delta")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start(str(target))
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None


def expected(spark: SparkSession, ids: range) -> object:
    return spark.createDataFrame(
        [(f"tx-{i}", f"body-{i}", str(i % 4)) for i in ids],
        "key string, value string, queue string",
    )


def test_kafka_records_land_in_delta_once(
    spark: SparkSession, bootstrap_servers: str, kafka_topic: str, warehouse: Path
) -> None:
    target, checkpoint = warehouse / "landed", warehouse / "_cp"
    produce(bootstrap_servers, kafka_topic, range(0, 100))
    ingest(spark, bootstrap_servers, kafka_topic, target, checkpoint)
    produce(bootstrap_servers, kafka_topic, range(100, 130))
    ingest(spark, bootstrap_servers, kafka_topic, target, checkpoint)
    ingest(spark, bootstrap_servers, kafka_topic, target, checkpoint)  # nothing new

    landed = spark.read.format("delta").load(str(target))
    assert landed.select("partition", "offset").distinct().count() == 130
    assert_df_equality(
        landed.select("key", "value", "queue"), expected(spark, range(130)), ignore_row_order=True
    )


def test_spark_read_committed_skips_aborted_transactions(
    spark: SparkSession, bootstrap_servers: str, kafka_topic: str
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers, transactional_id=f"spark-{kafka_topic}"
    )
    try:
        producer.init_transactions()
        for outcome in ("commit", "abort", "commit"):
            producer.begin_transaction()
            producer.send(kafka_topic, key=outcome.encode(), value=b"x", partition=0)
            producer.flush()
            getattr(producer, f"{outcome}_transaction")()
    finally:
        producer.close()

    def keys(isolation: str) -> list[str]:
        frame = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("kafka.isolation.level", isolation)
            .option("subscribe", kafka_topic)
            .load()
        )
        return sorted(row.key.decode() for row in frame.select("key").collect())

    assert keys("read_committed") == ["commit", "commit"]
    assert keys("read_uncommitted") == ["abort", "commit", "commit"]
