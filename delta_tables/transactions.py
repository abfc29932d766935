"""`system/transactions`: one row per final state a transaction reaches.

COMMITTED, ROLLED_BACK or DISCARDED, with the reason, the number of checks sent, the op
that decided it, and when it was prepared and resolved. A discarded transaction that an
operator later commits, rolls back or resumes gets a further row; the newest row is the
transaction's current final state.
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

from delta_tables.table import TableSpec

SCHEMA = StructType(
    [
        StructField("transaction_id", StringType(), nullable=False),
        StructField("msg_id", StringType()),
        StructField("producer_group", StringType()),
        StructField("topic", StringType()),
        StructField("queue_id", IntegerType()),
        StructField("state", StringType(), nullable=False),
        StructField("reason", StringType()),
        StructField("check_count", IntegerType(), nullable=False),
        StructField("deciding_op_id", StringType()),
        StructField("prepared_at", TimestampType()),
        StructField("resolved_at", TimestampType(), nullable=False),
        StructField("batch_id", LongType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/transactions",
    schema=SCHEMA,
    description="One row per final state reached (COMMITTED, ROLLED_BACK, DISCARDED)",
    stats_columns=("transaction_id", "producer_group", "resolved_at"),
)
