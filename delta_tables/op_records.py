"""`system/op_records`: every op record (COMMIT, ROLLBACK, UNKNOWN), as landed by ingest.

The twin of RocketMQ's RMQ_SYS_TRANS_OP_HALF_TOPIC, append-only. `op_id` is derived from
the ingress record's position (`op-<partition, 4 hex>-<offset, 16 hex>`), so a replayed
ingest batch produces the same ids, and ids sort like positions within a partition. An op
from an operator carries who (`operator`) and why (`reason`). Rows of kind TICK are
heartbeats, as in `system/half_messages`; no auto compaction, for the same reason.
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from delta_tables.table import TableSpec

KIND_OP = "OP"
KIND_TICK = "TICK"

SCHEMA = StructType(
    [
        StructField("kind", StringType(), nullable=False),
        StructField("op_id", StringType()),
        StructField("transaction_id", StringType()),
        StructField("producer_group", StringType()),
        StructField("op", StringType()),  # COMMIT | ROLLBACK | UNKNOWN
        StructField("from_check", BooleanType()),
        StructField("operator", StringType()),  # set for an operator's op: who
        StructField("reason", StringType()),  # and why
        StructField("born_at", TimestampType()),
        StructField("stored_at", TimestampType(), nullable=False),
        StructField("ingress_partition", IntegerType(), nullable=False),
        StructField("ingress_offset", LongType(), nullable=False),
        StructField("ingested_at", TimestampType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/op_records",
    schema=SCHEMA,
    description="Op records (COMMIT/ROLLBACK/UNKNOWN) and ingest heartbeats",
    stats_columns=("transaction_id", "producer_group", "stored_at"),
)
