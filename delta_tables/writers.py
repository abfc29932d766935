"""`system/writers`: one row per coordinator start, the writer epoch it claimed (contract 7.10).

Each start of a coordinator (and each `txcoord state rebuild`) claims the next epoch here
before it writes anything else; the claim is a Delta commit that carries the epoch as an app
transaction, so two starts can never claim the same one (the second's commit conflicts and it
claims the next). Every later write of that coordinator carries its epoch too, and a table
that has seen a newer epoch refuses it: streams/writes/writer_fence.py. The rows are the audit trail
an operator reads when a coordinator stopped as fenced: who took over, from where, when.
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
        StructField("epoch", LongType(), nullable=False),
        StructField("app_id", StringType(), nullable=False),
        StructField("checkpoint", StringType(), nullable=False),
        StructField("host", StringType(), nullable=False),
        StructField("pid", IntegerType(), nullable=False),
        StructField("claim_id", StringType(), nullable=False),
        StructField("started_at", TimestampType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/writers",
    schema=SCHEMA,
    description="Writer epochs: one row per coordinator start (the newest alone may write)",
    stats_columns=("epoch", "started_at"),
)
