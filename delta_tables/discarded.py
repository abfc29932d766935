"""`system/discarded`: halves the coordinator gave up on (RocketMQ's TRANS_CHECK_MAX_TIME_TOPIC).

Kept in full, never lost: an operator can resume one (checks start again from zero) or
decide it. `reason` is `check_max` (transaction_check_max checks unanswered) or `expired`
(older than file_reserved_time).
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

from delta_tables.columns import MESSAGE, PREPARED_AT
from delta_tables.table import TableSpec

SCHEMA = StructType(
    [
        *MESSAGE,
        StructField("check_immunity_seconds", IntegerType()),
        PREPARED_AT,
        StructField("reason", StringType(), nullable=False),
        StructField("check_count", IntegerType(), nullable=False),
        StructField("discarded_at", TimestampType(), nullable=False),
        StructField("batch_id", LongType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/discarded",
    schema=SCHEMA,
    description="Discarded halves (check_max or expired); resumable",
    stats_columns=("transaction_id", "producer_group", "discarded_at"),
)
