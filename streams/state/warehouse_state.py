"""The coordinator's state derived from the warehouse alone.

For `txcoord state rebuild --from warehouse` (streams/state/rebuild.py): when the checkpoint
is gone, unreadable, or of a layout this version cannot resume. The input tables are the
truth: every ingress record the coordinator ever read was landed in `system/half_messages`,
`system/op_records` or `system/quarantine` (a valid heartbeat is not landed, and moves
nothing but the watermark). So

- first the rebuild lands what a batch cut short between its landing commits left unlanded,
  and the new query reads each ingress partition on from there (streams/state/landing_repair.py):
  nothing landed is read again, nothing unlanded is skipped;
- then it writes the final states and verdicts a batch cut short between its decision
  commits left unwritten (streams/state/decision_repair.py): the derivation takes them as written;
- each transaction's state is derived from its rows of every table (streams/state/derivation.py,
  one Python pass over the rows sorted by key: `mapInArrow`), including ops that landed in a
  batch cut short before they were judged, which the stage then judges;
- the queues' next offsets are taken as the largest of `system/queue_offsets` and the topic
  tables' own offsets: a batch cut short between its deliveries and its offsets cannot make
  the next one number from offsets already used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from coordinator.core.config import Config
from delta_tables import (
    check_requests,
    half_messages,
    op_records,
    op_verdicts,
    queue_offsets,
    topics,
    transactions,
)
from delta_tables.registry import warehouse_tables
from streams.stage.lifecycle import Rules
from streams.stage.processor import KEY
from streams.state.derivation import (
    CHECK,
    DELIVERY,
    FINAL,
    HALF,
    HALF_FIELDS,
    OP,
    VERDICT,
    derive,
)


def _table(spark: SparkSession, location: str) -> DataFrame:
    return spark.read.format("delta").load(location)


def _ms(column: str) -> Column:
    return F.unix_millis(F.col(column))


def history(spark: SparkSession, config: Config) -> DataFrame:
    """Return every transaction's rows of every table, one frame: the key, `source`
    (streams/state/derivation.py), and the fields the derivation reads."""
    warehouse = config.warehouse
    halves = (
        _table(spark, half_messages.TABLE.path(warehouse))
        .where(F.col("kind") == half_messages.KIND_HALF)
        .select(
            *KEY,
            F.lit(HALF).alias("source"),
            *[name for name in HALF_FIELDS[:-1] if name not in KEY],
            _ms("stored_at").alias("stored_ms"),
        )
    )
    ops = (
        _table(spark, op_records.TABLE.path(warehouse))
        .where(F.col("kind") == op_records.KIND_OP)
        .select(
            *KEY,
            F.lit(OP).alias("source"),
            "op_id",
            "op",
            "from_check",
            "operator",
            "reason",
            _ms("stored_at").alias("stored_ms"),
        )
    )
    checks = _table(spark, check_requests.TABLE.path(warehouse)).select(
        *KEY,
        F.lit(CHECK).alias("source"),
        "check_number",
        _ms("requested_at").alias("at_ms"),
        "batch_id",
    )
    finals = _table(spark, transactions.TABLE.path(warehouse)).select(
        *KEY,
        F.lit(FINAL).alias("source"),
        "state",
        "check_count",
        "deciding_op_id",
        _ms("resolved_at").alias("at_ms"),
        "batch_id",
    )
    verdicts = _table(spark, op_verdicts.TABLE.path(warehouse)).select(
        *KEY,
        F.lit(VERDICT).alias("source"),
        "op_id",
        "op",
        "verdict",
        "detail",
        _ms("stored_at").alias("stored_ms"),
        _ms("recorded_at").alias("at_ms"),
        "batch_id",
    )
    frames = [halves, ops, checks, finals, verdicts]
    for name in warehouse_tables(warehouse):
        if name.startswith("topics/"):
            delivered = _table(spark, topics.table(name.removeprefix("topics/")).path(warehouse))
            frames.append(
                delivered.select(
                    *KEY,
                    F.lit(DELIVERY).alias("source"),
                    F.col("commit_op_id").alias("op_id"),
                    _ms("delivered_at").alias("at_ms"),
                    "batch_id",
                )
            )
    joined = frames[0]
    for frame in frames[1:]:
        joined = joined.unionByName(frame, allowMissingColumns=True)
    return joined.where(F.col("transaction_id").isNotNull())


def derived_state(
    spark: SparkSession, config: Config, rules: Rules, now_ms: int, state_schema: StructType
) -> DataFrame:
    """Return the stage's state derived from the warehouse: KEY, then `state_schema`'s
    fields (the initial state of a new checkpoint), one row per transaction it keeps."""
    output = StructType([StructField(name, StringType()) for name in KEY] + list(state_schema))
    arrow_output = to_arrow_schema(output)
    partitions = config.spark.shuffle_partitions

    def derive_all(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        found: list[dict[str, Any]] = []
        key: tuple[Any, Any] | None = None
        rows: list[dict[str, Any]] = []

        def flush() -> None:
            if key is not None and (state := derive(rows, rules, now_ms)) is not None:
                found.append({KEY[0]: key[0], KEY[1]: key[1], **state})

        for batch in batches:
            for row in batch.to_pylist():
                here = (row[KEY[0]], row[KEY[1]])
                if here != key:
                    flush()
                    key, rows = here, []
                rows.append(row)
            if len(found) >= 10_000:
                yield from pa.Table.from_pylist(found, schema=arrow_output).to_batches()
                found = []
        flush()
        if found:
            yield from pa.Table.from_pylist(found, schema=arrow_output).to_batches()

    return (
        history(spark, config)
        .repartition(partitions, *KEY)
        .sortWithinPartitions(*KEY)
        .mapInArrow(derive_all, output)
    )


def queue_offsets_behind(spark: SparkSession, config: Config) -> dict[tuple[str, int], int]:
    """Return the queues whose next offset in `system/queue_offsets` is behind their topic
    table (a batch cut short between the two), with the next offset the topic table implies."""
    warehouse = config.warehouse
    recorded = queue_offsets.read(spark, warehouse)
    behind: dict[tuple[str, int], int] = {}
    for name in warehouse_tables(warehouse):
        if not name.startswith("topics/"):
            continue
        topic = name.removeprefix("topics/")
        ends = (
            _table(spark, topics.table(topic).path(warehouse))
            .groupBy("queue_id")
            .agg((F.max("queue_offset") + 1).alias("next"))
        )
        for row in ends.collect():
            queue = (topic, int(row.queue_id))
            if int(row.next) > recorded.get(queue, 0):
                behind[queue] = int(row.next)
    return behind
