"""`system/queue_offsets`: the next free queue offset of every (topic, queue).

Append-only: each batch that delivers appends one row per (topic, queue) it moved, with
the batch id, after the topic tables and with the same batch mark (streams/writes/delta_writes.py).
Offsets only grow, so a queue's next offset is the largest `next_offset` of its rows
(`next_offsets`). Rewriting one row per queue instead would make every batch rebuild the
table's file list to remove it (seconds a batch); an append does not. A
replayed batch reads the offsets from before itself and assigns the very same ones (contract 6:
dense, stable across crashes and replays); `txcoord maintain` compacts the small files.

The coordinator reads them at start and after a replayed batch with delta-rs (`read`: no
Spark job for the JVM to compile first), or with Spark where delta-rs cannot read the table.
"""

from __future__ import annotations

import logging

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from coordinator.protocol.deliveries import QUEUE_OFFSETS_TABLE, delta_rs_location
from delta_tables.table import TableSpec

log = logging.getLogger(__name__)

#: A queue: (topic, queue id).
Queue = tuple[str, int]

SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("queue_id", IntegerType(), nullable=False),
        StructField("next_offset", LongType(), nullable=False),
        StructField("batch_id", LongType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name=QUEUE_OFFSETS_TABLE,
    schema=SCHEMA,
    description="Next queue offset per (topic, queue): one row per batch that moved it",
    stats_columns=("topic", "queue_id", "batch_id"),
)


def next_offsets(rows: DataFrame) -> DataFrame:
    """Return (topic, queue_id, next_offset): each queue's next free offset, from its rows."""
    return rows.groupBy("topic", "queue_id").agg(F.max("next_offset").alias("next_offset"))


def read(spark: SparkSession, warehouse: str) -> dict[Queue, int]:
    """Return each queue's next free offset, as `system/queue_offsets` holds them now."""
    location = TABLE.path(warehouse)
    try:
        rows = DeltaTable(delta_rs_location(location)).to_pyarrow_table(
            columns=["topic", "queue_id", "next_offset"]
        )
    except Exception as exc:
        log.info("reading %s with Spark (delta-rs cannot read it: %s)", location, exc)
        frame = next_offsets(spark.read.format("delta").load(location))
        return {(row.topic, row.queue_id): row.next_offset for row in frame.collect()}
    grouped = rows.group_by(["topic", "queue_id"], use_threads=False).aggregate(
        [("next_offset", "max")]
    )
    return {(row["topic"], row["queue_id"]): row["next_offset_max"] for row in grouped.to_pylist()}
