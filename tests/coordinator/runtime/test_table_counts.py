"""The tally's starting totals: delta-rs and Spark count the same real tables alike.

Rows are drawn at random (seeded: tests/conftest.py's `rng`) with the values the counts
look at, nulls included, and appended in several commits. Each reader must give what the
drawn rows say, and so both give the same.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from coordinator.core.config import load_config
from coordinator.runtime.table_counts import Totals, read_totals, spark_totals, table_counts
from delta_tables import check_requests, half_messages, op_records, quarantine, transactions
from delta_tables.registry import create_system_tables
from delta_tables.table import TableSpec

pytestmark = [pytest.mark.spark, pytest.mark.long]

NOW = datetime(2026, 11, 25, tzinfo=UTC)
#: A value for each non-nullable column the counts do not look at.
FILLER: dict[Any, Any] = {
    StringType: "x", IntegerType: 0, LongType: 0, TimestampType: NOW, BooleanType: False,
}  # fmt: skip


def row(schema: StructType, **values: Any) -> tuple[Any, ...]:
    """Return a row of `schema`: `values`, and a filler (or null) in every other column."""
    return tuple(
        values[f.name] if f.name in values else (None if f.nullable else FILLER[type(f.dataType)])
        for f in schema
    )


def append(
    spark: SparkSession, warehouse: str, spec: TableSpec, rows: list[tuple[Any, ...]]
) -> None:
    spark.createDataFrame(rows, spec.schema).write.format("delta").mode("append").save(
        spec.path(warehouse)
    )


def draw(rng: random.Random) -> tuple[list[tuple[TableSpec, list[tuple[Any, ...]]]], Totals]:
    """Return random rows per table, and the totals they stand for."""
    topics = ["Orders", "Payments", None]
    expected = Totals()
    rows: list[tuple[TableSpec, list[tuple[Any, ...]]]] = []
    finals = []
    for _ in range(rng.randint(0, 40)):
        state = rng.choice(["COMMITTED", "ROLLED_BACK", "DISCARDED"])
        checks, topic = rng.choice([0, 0, 1, 3]), rng.choice(topics)
        finals.append(row(transactions.TABLE.schema, state=state, check_count=checks, topic=topic))
        expected.finals[state, checks > 0, topic] += 1  # type: ignore[index]
    rows.append((transactions.TABLE, finals))
    halves = []
    for _ in range(rng.randint(0, 40)):
        kind, topic = rng.choice([half_messages.KIND_HALF, "OTHER"]), rng.choice(topics)
        halves.append(row(half_messages.TABLE.schema, kind=kind, topic=topic))
        if kind == half_messages.KIND_HALF:
            expected.halves_by_topic[topic] += 1  # type: ignore[index]
    rows.append((half_messages.TABLE, halves))
    kinds = [rng.choice([op_records.KIND_OP, "OTHER"]) for _ in range(rng.randint(0, 30))]
    rows.append((op_records.TABLE, [row(op_records.TABLE.schema, kind=kind) for kind in kinds]))
    expected.ops = kinds.count(op_records.KIND_OP)
    numbers = [rng.randint(1, 3) for _ in range(rng.randint(0, 30))]
    rows.append(
        (check_requests.TABLE, [row(check_requests.TABLE.schema, check_number=n) for n in numbers])
    )
    expected.checks, expected.first_checks = len(numbers), numbers.count(1)
    expected.quarantined = rng.randint(0, 5)
    rows.append((quarantine.TABLE, [row(quarantine.TABLE.schema)] * expected.quarantined))
    return rows, expected


def test_delta_rs_and_spark_count_what_the_tables_hold(
    spark: SparkSession, tmp_path: Path, rng: random.Random
) -> None:
    warehouse = str(tmp_path / "warehouse")
    create_system_tables(spark, warehouse)
    assert read_totals(warehouse) == Totals() == spark_totals(spark, warehouse)
    drawn: list[Totals] = []
    for _ in range(3):  # several commits, so several files per table
        rows, expected = draw(rng)
        for spec, table_rows in rows:
            if table_rows:
                append(spark, warehouse, spec, table_rows)
        drawn.append(expected)
    total = Totals(
        finals=sum((t.finals for t in drawn), Counter()),
        halves_by_topic=sum((t.halves_by_topic for t in drawn), Counter()),
        ops=sum(t.ops for t in drawn),
        quarantined=sum(t.quarantined for t in drawn),
        checks=sum(t.checks for t in drawn),
        first_checks=sum(t.first_checks for t in drawn),
    )
    assert read_totals(warehouse) == total
    assert spark_totals(spark, warehouse) == total
    config = load_config(overrides={"warehouse": warehouse})
    assert table_counts(spark, config) == total.counts()


def test_a_warehouse_delta_rs_cannot_read_is_counted_by_spark(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Hadoop's `file:/path` form: Spark reads it, delta-rs takes it for a relative path.
    warehouse = f"file:{tmp_path / 'warehouse'}"
    create_system_tables(spark, warehouse)
    committed = row(transactions.TABLE.schema, state="COMMITTED", check_count=1, topic="Orders")
    append(spark, warehouse, transactions.TABLE, [committed])
    with pytest.raises(Exception):  # noqa: B017 - whatever delta-rs raises
        read_totals(warehouse)
    counts = table_counts(spark, load_config(overrides={"warehouse": warehouse}))
    assert (counts.committed, counts.finals_after_check, counts.finals_by_topic) == (
        1,
        1,
        Counter({"Orders": 1}),
    )
