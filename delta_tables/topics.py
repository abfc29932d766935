"""`topics/<topic>`: the delivered messages of one real topic, with dense queue offsets.

A committed half is restored to its real topic and queue (RocketMQ's REAL_TOPIC and
REAL_QID) and appended here exactly once, at the next offset of its queue. Topic names
become table paths, so only RocketMQ's topic alphabet is accepted and system topic names
are refused: nothing a producer sends can address a path outside `topics/`.
"""

from __future__ import annotations

import re

from pyspark.sql.types import (
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from delta_tables.columns import MESSAGE, PREPARED_AT
from delta_tables.table import TableSpec

#: RocketMQ's TopicValidator: letters, digits, '_', '%', '|', '-'; at most 127 characters.
TOPIC_NAME = re.compile(r"^[A-Za-z0-9_%|-]{1,127}$")

#: RocketMQ's system topics, and prefixes reserved for system use.
SYSTEM_TOPICS = frozenset(
    {
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SCHEDULE_TOPIC_XXXX",
        "TBW102",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "BenchmarkTest",
        "RMQ_SYS_TRACE_TOPIC",
        "system",
    }
)
SYSTEM_PREFIXES = ("RMQ_SYS_", "rmq_sys_", "%RETRY%", "%DLQ%", "%SYS%")


def topic_name_problem(topic: object) -> str | None:
    """Return why `topic` cannot be a topic name, or None if it can."""
    if not isinstance(topic, str):
        return f"topic must be a string, not {type(topic).__name__}"
    if not TOPIC_NAME.fullmatch(topic):
        return (
            "topic must be 1-127 characters of letters, digits, '_', '%', '|' or '-' "
            f"(RocketMQ's rule), not {topic[:140]!r}"
        )
    if topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_PREFIXES):
        return f"topic {topic!r} is a system topic name and cannot be used"
    return None


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
        name=f"topics/{topic}",
        schema=SCHEMA,
        description=f"Messages delivered to topic {topic}",
        properties={"delta.autoOptimize.autoCompact": "true"},
    )
