"""`system/check_requests`: every check request the coordinator sent (RocketMQ's
CHECK_TRANSACTION_STATE), with the message so the producer can answer from it."""

from __future__ import annotations

from pyspark.sql.types import IntegerType, LongType, StructField, StructType, TimestampType

from delta_tables.columns import MESSAGE, PREPARED_AT
from delta_tables.table import TableSpec

SCHEMA = StructType(
    [
        *MESSAGE,
        StructField("check_number", IntegerType(), nullable=False),  # 1, 2, ... per transaction
        PREPARED_AT,
        StructField("requested_at", TimestampType(), nullable=False),
        StructField("batch_id", LongType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/check_requests",
    schema=SCHEMA,
    description="Check requests sent to producer groups",
    stats_columns=("transaction_id", "producer_group", "requested_at"),
)
