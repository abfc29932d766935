"""Column groups that several tables share, so one message looks the same everywhere."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    TimestampType,
)

#: The message a producer sent, as RocketMQ keeps it in the half topic with its real topic
#: and queue set aside (REAL_TOPIC / REAL_QID) and its group in PGROUP.
MESSAGE = [
    StructField("transaction_id", StringType()),
    StructField("msg_id", StringType()),
    StructField("producer_group", StringType()),
    StructField("topic", StringType()),
    StructField("queue_id", IntegerType()),
    StructField("body", BinaryType()),
    StructField("keys", ArrayType(StringType())),
    StructField("tags", StringType()),
    StructField("properties", MapType(StringType(), StringType())),
]

#: When the half was stored: the broker's LogAppendTime of its ingress record, the only
#: clock the coordinator trusts (producers' clocks may be skewed; contract 9).
PREPARED_AT = StructField("prepared_at", TimestampType())
