"""`system/half_messages`: every half message, as landed by the ingest stream.

The lakehouse twin of RocketMQ's RMQ_SYS_TRANS_HALF_TOPIC. Append-only, one row per
ingress record. Rows of kind TICK are the ingest's heartbeats: they carry only
`stored_at` (and the transaction id HEARTBEAT_ID), keep the coordinator's event time
moving when no producer writes (contract 7.4), and are filtered out by every reader that
wants messages (`WHERE kind = 'HALF'`).

The coordinator reads this table as a stream, one ingest commit at a time, and relies on
each commit being a single file covering one ingest batch; compacting it while the
coordinator reads would merge time ranges, so this table has no auto compaction.
"""

from __future__ import annotations

from pyspark.sql.types import (
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from delta_tables.columns import MESSAGE
from delta_tables.table import TableSpec

KIND_HALF = "HALF"
KIND_TICK = "TICK"
#: The transaction id of heartbeat rows. It starts with a space, which no valid transaction
#: id may, and it is not NULL on purpose: Spark infers `transaction_id IS NOT NULL` from the
#: join condition and pushes that filter below the watermark, which would hide heartbeats
#: from the very operator they exist to move.
HEARTBEAT_ID = " heartbeat"

SCHEMA = StructType(
    [
        StructField("kind", StringType(), nullable=False),
        *MESSAGE,
        StructField("check_immunity_seconds", IntegerType()),
        StructField("born_at", TimestampType()),  # the producer's own clock: recorded only
        StructField("stored_at", TimestampType(), nullable=False),  # LogAppendTime: event time
        StructField("ingress_partition", IntegerType(), nullable=False),
        StructField("ingress_offset", LongType(), nullable=False),
        StructField("ingested_at", TimestampType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/half_messages",
    schema=SCHEMA,
    description="Half (prepare) messages and ingest heartbeats; RMQ_SYS_TRANS_HALF_TOPIC",
    stats_columns=("transaction_id", "producer_group", "stored_at"),
)
