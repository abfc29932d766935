"""`system/op_verdicts`: what each op record did, for audit (SPEC section 3).

APPLIED (it decided the transaction), NO_EFFECT (UNKNOWN), DUPLICATE or CONFLICT (after
the transaction ended), WRONG_GROUP (rejected: another producer group), ORPHAN (no half
within the join window) or LATE (after DISCARDED).
"""

from __future__ import annotations

from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from delta_tables.table import TableSpec

SCHEMA = StructType(
    [
        StructField("op_id", StringType(), nullable=False),
        StructField("transaction_id", StringType()),
        StructField("producer_group", StringType()),
        StructField("op", StringType()),
        StructField("verdict", StringType(), nullable=False),
        StructField("detail", StringType()),
        StructField("stored_at", TimestampType()),
        StructField("recorded_at", TimestampType(), nullable=False),
        StructField("batch_id", LongType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/op_verdicts",
    schema=SCHEMA,
    description="The verdict on every op record: applied, duplicate, conflict, rejected...",
    properties={"delta.autoOptimize.autoCompact": "true"},
)
