"""`topics/<topic>`: the delivered messages of one real topic, with dense queue offsets.

A committed half is restored to its real topic and queue (RocketMQ's REAL_TOPIC and
REAL_QID) and appended here exactly once, at the next offset of its queue. Topic names
become table paths, so only names that pass coordinator/protocol/names.py `topic_name_problem` are
accepted: nothing a producer sends can address a path outside `topics/`.
"""

from __future__ import annotations

from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from coordinator.protocol.deliveries import topic_table
from coordinator.protocol.names import topic_name_problem
from delta_tables.columns import MESSAGE, PREPARED_AT
from delta_tables.table import TableSpec

SCHEMA = StructType(
    [
        *MESSAGE[:5],
        StructField("queue_offset", LongType(), nullable=False),
        *MESSAGE[5:],
        PREPARED_AT,
        StructField("committed_at", TimestampType(), nullable=False),
        StructField("delivered_at", TimestampType(), nullable=False),
        StructField("commit_op_id", StringType()),
        StructField("batch_id", LongType(), nullable=False),
    ]
)


def table(topic: str) -> TableSpec:
    """Return the table of real topic `topic`; refuse names that are not topic names."""
    problem = topic_name_problem(topic)
    if problem:
        raise ValueError(problem)
    return TableSpec(
        name=topic_table(topic),
        schema=SCHEMA,
        description=f"Messages delivered to topic {topic}",
        # Consumers read a queue by offset range, or a time range.
        stats_columns=("transaction_id", "queue_id", "queue_offset", "delivered_at"),
    )
