"""The ingest's Spark rules and the protocol's name rules (coordinator/protocol/names.py) agree on
names.

Spark matches with Java's regex (`rlike`), Python with `re.fullmatch`: the same pattern text
means different things at the end of a string (Java's and Python's `$` both accept a final
line terminator; Java counts \\r, \\u0085, \\u2028 and \\u2029 among them). Generated names,
many of them valid names with a terminator or control character appended, must get the same
verdict on both sides for the transaction id, the producer group and the real topic.
One generated example of ~200 records (one Spark DataFrame), the known edge cases included.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from coordinator.core.topics import TopicLayout
from coordinator.protocol import ingress as fmt
from coordinator.protocol.names import (
    TOPIC_NAME,
    group_problem,
    topic_name_problem,
    transaction_id_problem,
)
from streams.ingest.transforms import IngestRules, classify

pytestmark = pytest.mark.spark

RULES = IngestRules(
    layout=TopicLayout(half="h", op="o"),
    max_message_size=1024,
    default_queue_count=4,
    max_check_immunity_seconds=3600,
)
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
TAILS = ["", "\n", "\r\n", "\r", "\x00", "\x7f", "\t", " ", "\x85", "\u2028", "\u2029", "é"]
ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=140)


def names(pattern: str) -> st.SearchStrategy[str]:
    """Valid names, valid names with an odd tail, and any text at all."""
    valid = st.from_regex(re.compile(pattern), fullmatch=True)
    return st.one_of(valid, st.tuples(valid, st.sampled_from(TAILS)).map("".join), ANY_TEXT)


CASES = st.lists(
    st.tuples(
        names(fmt.TRANSACTION_ID_PATTERN), names(fmt.GROUP_PATTERN), names(TOPIC_NAME.pattern)
    ),
    min_size=64,
    max_size=64,
)
#: Edge cases every run includes: terminators Java and Python treat differently.
EDGES = [("tx\n", "g\n", "T\n"), ("tx\r", "g\r\n", "T\u2028"), ("tx\x85", "g\x00", "T\t")]


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck))
@given(generated=CASES)
def test_spark_and_protocol_agree_on_names(spark: SparkSession, generated: list[Any]) -> None:
    cases = EDGES + generated
    rows: list[tuple[Any, ...]] = []
    for tx, group, topic in cases:
        # One field varies per record, the others are valid: the verdict is that field's.
        for key, headers in (
            (tx, [(fmt.PRODUCER_GROUP, b"g"), (fmt.TOPIC, b"T")]),
            ("tx", [(fmt.PRODUCER_GROUP, group.encode()), (fmt.TOPIC, b"T")]),
            ("tx", [(fmt.PRODUCER_GROUP, b"g"), (fmt.TOPIC, topic.encode())]),
        ):
            rows.append((key.encode(), b"", "h", 0, len(rows), datetime(2026, 1, 1), 1, headers))
    frame = spark.createDataFrame(rows, KAFKA_SCHEMA)
    found = classify(frame, RULES, F.current_timestamp()).orderBy("source_offset").collect()
    spark_ok = [r.reason is None for r in found]
    python_ok = []
    for tx, group, topic in cases:
        python_ok += [
            transaction_id_problem(tx) is None,
            group_problem(group) is None,
            topic_name_problem(topic) is None,
        ]
    disagree = [
        (rows[i][0], rows[i][7], found[i].reason)
        for i in range(len(rows))
        if spark_ok[i] != python_ok[i]
    ]
    assert disagree == []
