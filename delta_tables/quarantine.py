"""`system/quarantine`: ingress records that could not be parsed or validated, with the reason.

Bad input becomes data instead of a crashed stream (contract 5.2 and 9): the raw record is
kept byte for byte, so it can be inspected, fixed and re-sent.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from delta_tables.table import TableSpec

HEADER = StructType([StructField("key", StringType()), StructField("value", BinaryType())])

SCHEMA = StructType(
    [
        StructField("source_topic", StringType(), nullable=False),
        StructField("source_partition", IntegerType(), nullable=False),
        StructField("source_offset", LongType(), nullable=False),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("headers", ArrayType(HEADER)),
        StructField("reason", StringType(), nullable=False),
        StructField("stored_at", TimestampType()),
        StructField("quarantined_at", TimestampType(), nullable=False),
    ]
)

TABLE = TableSpec(
    name="system/quarantine",
    schema=SCHEMA,
    description="Ingress records refused by validation, with the reason",
    stats_columns=("source_topic", "stored_at", "quarantined_at"),
)
