"""The substrate's ceiling: raw Kafka -> Delta append with the same Spark, no join.

A topic is filled with records shaped like half messages (same headers, same body size),
then one streaming query reads it with `Trigger.AvailableNow` (everything, one batch, as
the ingest reads a backlog: no maxOffsetsPerTrigger) and appends key, value, headers,
partition, offset and timestamp to a Delta table. Rate = rows / wall time from `start()` to
the query's end, which includes query start-up; `batch_rows_per_s` is Spark's own
processedRowsPerSecond of the batch, without it. Each repeat uses a fresh checkpoint and
table. A transaction costs at least two such records (half + op), so the ceiling in
transactions per second is at most half the record rate.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka import KafkaProducer

from coordinator.bench.stats import median
from coordinator.kafka_clients.admin import ensure_topic
from coordinator.protocol import ingress as fmt

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def prefill(bootstrap: str, topic: str, records: int, body_size: int = 100) -> float:
    """Write `records` half-shaped records to `topic`; return the seconds it took."""
    ensure_topic(bootstrap, topic, partitions=4)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=20,
        batch_size=512 * 1024,
    )
    body = b"x" * body_size
    started = time.monotonic()
    for number in range(records):
        key = f"ceiling-{number:09d}-c"
        producer.send(
            topic,
            key=key.encode(),
            value=body,
            headers=[
                (fmt.PRODUCER_GROUP, b"bench-ceiling"),
                (fmt.TOPIC, b"BenchCeiling"),
                (fmt.KEYS, json.dumps([key]).encode()),
                (fmt.BORN_AT, b"0"),
                (f"{fmt.PROPERTY_PREFIX}bench.kind", b"commit"),
            ],
        )
    producer.flush(timeout=120)
    producer.close(timeout=10)
    return time.monotonic() - started


def append_once(spark: SparkSession, bootstrap: str, topic: str, work_dir: Path) -> dict[str, Any]:
    """Run one AvailableNow Kafka -> Delta append of the whole topic; return its numbers."""
    work_dir.mkdir(parents=True, exist_ok=True)
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .select("key", "value", "headers", "partition", "offset", "timestamp")
    )
    started = time.monotonic()
    query = (
        source.writeStream.format("delta")
        .option("checkpointLocation", str(work_dir / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(work_dir / "table"))
    )
    try:
        query.awaitTermination(600)
    finally:
        query.stop()
    seconds = time.monotonic() - started
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(int(p["numInputRows"]) for p in progress)
    return {
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds, 1) if seconds > 0 else None,
        "batches": len(progress),
        "batch_rows_per_s": round(
            sum(float(p["processedRowsPerSecond"]) for p in progress) / len(progress), 1
        )
        if progress
        else None,
    }


def run_ceiling(
    spark: SparkSession, bootstrap: str, topic: str, *, records: int, repeats: int, work_dir: Path
) -> dict[str, Any]:
    """Fill the topic once, append it `repeats` times; return each run and the medians."""
    fill_seconds = prefill(bootstrap, topic, records)
    runs = [append_once(spark, bootstrap, topic, work_dir / f"run-{i}") for i in range(repeats)]
    rate = median([r["rows_per_s"] for r in runs if r["rows_per_s"]])
    return {
        "what": "raw Kafka -> Delta append of half-shaped records, Trigger.AvailableNow, "
        "no join, same Spark session",
        "records": records,
        "prefill_seconds": round(fill_seconds, 2),
        "repeats": runs,
        "rows_per_s_median": rate,
        "batch_rows_per_s_median": median(
            [r["batch_rows_per_s"] for r in runs if r["batch_rows_per_s"]]
        ),
        # Each transaction is at least two ingress records (its half and its op).
        "tx_per_s_equivalent": round(rate / 2, 1) if rate else None,
    }
