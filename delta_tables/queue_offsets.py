"""`system/queue_offsets`: the next free queue offset of every (topic, queue).

One row per (topic, queue), with the batch that last moved it. The table is tiny (one
row per queue), so each batch that delivers rewrites it whole, after the topic tables and
with the same batch mark (streams/delta_writes.py): a replayed batch reads the
offsets from before itself and assigns the very same ones (SPEC 6: dense, stable across
crashes and replays).
"""

from __future__ import annotations

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from delta_tables.table import TableSpec

SCHEMA = StructType(
    [
        StructField("topic", StringType(), nullable=False),
        StructField("queue_id", IntegerType(), nullable=False),
        StructField("next_offset", LongType(), nullable=False),
        StructField("batch_id", LongType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/queue_offsets",
    schema=SCHEMA,
    description="Next queue offset per (topic, queue)",
)
