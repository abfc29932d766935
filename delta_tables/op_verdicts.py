"""`system/op_verdicts`: what each op record did, for audit (contract 3).

APPLIED (it decided the transaction), NO_EFFECT (UNKNOWN), DUPLICATE or CONFLICT (after
the transaction ended), IGNORED (an operator's RESUME of a live transaction), ORPHAN (no
half of the op's own group with that id within the join window) or LATE (after DISCARDED).
A transaction is (producer_group, transaction_id) (contract 3): an op of another group than a
half's never reaches that half, so it is its own group's orphan, never a verdict on the
other group's transaction.
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
    stats_columns=("op_id", "transaction_id", "recorded_at"),
)
