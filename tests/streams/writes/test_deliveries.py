"""The writer's deliveries on real Delta tables: numbered per queue, once, across topics."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from delta_tables.registry import create_system_tables
from streams.query.batch_writer import CoordinatorBatchWriter
from streams.stage.lifecycle import Kind
from streams.stage.processor import OUTPUT_SCHEMA
from streams.writes.arrow_rows import arrow_schema
from tests.harness import table
from tests.streams.conftest import ConfigFactory


def deliver_row(tx: str, topic: str, queue: int, committed_ms: int) -> dict[str, Any]:
    return {
        "kind": Kind.DELIVER.value, "transaction_id": tx, "at_ms": 2_000_000,
        "msg_id": f"m-{tx}", "producer_group": "orders", "topic": topic, "queue_id": queue,
        "body": tx.encode(), "prepared_ms": 1_000_000, "op_id": f"op-{tx}",
        "op_stored_ms": committed_ms,
    }  # fmt: skip


def deliver(
    spark: SparkSession, writer: CoordinatorBatchWriter, rows: list[dict[str, Any]], batch_id: int
) -> None:
    schema = arrow_schema(OUTPUT_SCHEMA)  # the stage's rows, as the writer collects them
    batch = pa.Table.from_pylist(
        [{f.name: row.get(f.name) for f in schema} for row in rows], schema
    )
    counts = Counter((row["topic"], row["queue_id"]) for row in rows)
    write_offsets, _ = writer._deliver(spark, batch, batch_id, counts)  # the topic tables
    write_offsets()  # then the queue offsets


def test_two_topics_in_one_batch_are_numbered_per_queue_in_commit_order(
    spark: SparkSession, make_config: ConfigFactory
) -> None:
    config: Config = make_config()
    create_system_tables(spark, config.warehouse)
    writer = CoordinatorBatchWriter(config, "test-app")
    first = [deliver_row(f"a{i}", "Alpha", i % 2, 5_000 - i) for i in range(5)]
    first += [deliver_row(f"b{i}", "Beta", 0, 6_000 + i) for i in range(3)]
    deliver(spark, writer, first, 0)
    deliver(spark, writer, [deliver_row("a9", "Alpha", 1, 1), deliver_row("b9", "Beta", 0, 1)], 1)
    deliver(spark, writer, first, 0)  # a replay of batch 0 writes nothing again

    def numbered(topic: str) -> list[tuple[int, int, str]]:
        return sorted(
            (r.queue_id, r.queue_offset, r.transaction_id)
            for r in table(spark, config, f"topics/{topic}").collect()
        )

    # Within a queue, in commit order (op store time), from 0 up without gaps; batch 1 goes on.
    assert numbered("Alpha") == [
        (0, 0, "a4"), (0, 1, "a2"), (0, 2, "a0"),
        (1, 0, "a3"), (1, 1, "a1"), (1, 2, "a9"),
    ]  # fmt: skip
    assert numbered("Beta") == [(0, 0, "b0"), (0, 1, "b1"), (0, 2, "b2"), (0, 3, "b9")]
    offsets = {
        (r.topic, r.queue_id, r.next_offset, r.batch_id)
        for r in table(spark, config, "system/queue_offsets").collect()
    }
    assert offsets == {
        ("Alpha", 0, 3, 0), ("Alpha", 1, 2, 0), ("Beta", 0, 3, 0),
        ("Alpha", 1, 3, 1), ("Beta", 0, 4, 1),
    }  # fmt: skip
