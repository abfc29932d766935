"""The ingest's rules and their JVM twin give the same rows for any record.

tests/reference/ingest_rules.py's `reference_parse` (Spark SQL expressions, the readable model) and
streams/ingest/transforms.py's `parse` (txcoord.Ingress in the JVM, what the query runs) see the
same random raw records (tests/streams/ingress_records.py: near-valid, extreme and any bytes), in
both topic layouts, with the source topics, timestamp types and positions varied too. The limits are
drawn as well (largest body, queue count, largest check immunity), and the records carry values on
both sides of the drawn limits. Every column of every row must be equal, valid or not: the reasons,
and what a refused record parses into.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession

from coordinator.core.topics import TopicLayout
from coordinator.protocol import ingress as fmt
from streams.ingest.rules import PARSED_COLUMNS, IngestRules
from streams.ingest.transforms import parse
from tests.reference.ingest_rules import reference_parse
from tests.streams.ingress_records import MAX_MESSAGE, header, raw_record

T = TypeVar("T")

pytestmark = [pytest.mark.spark, pytest.mark.long]

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
LAYOUTS = {"shared": TopicLayout(half="h", op="o"), "per-group": TopicLayout(per_group=True)}
#: Rule sets drawn per layout; each runs over its own records in one Spark job.
RULE_SETS = 2
#: Source topics per layout and kind of record; the last of each is read by neither kind.
SOURCES = {
    False: {"half": ["h"], "op": ["o"], "other": ["x"]},
    True: {
        "half": ["txcoord.half", "txcoord.half.orders", "txcoord.half.g", "txcoord.half.o.x"],
        "op": ["txcoord.op", "txcoord.op.orders", "txcoord.operator.alice",
               "txcoord.operator.orders", "txcoord.operator." + "p" * 250],
        "other": ["txcoord.halfx", "txcoord.check.orders"],
    },
}  # fmt: skip
#: Headers at the edge of a rule: an operator's, JSON keys, numbers, names and budgets.
EDGE_HEADERS = st.sampled_from(
    [
        (fmt.OPERATOR, b"alice"),
        (fmt.OPERATOR, b"orders"),
        (fmt.OPERATOR, "é" * 300),
        (fmt.OPERATOR, b""),
        (fmt.REASON, b"because"),
        (fmt.REASON, b"r" * 5000),
        (fmt.OP, b"RESUME"),
        (fmt.OP, b"commit"),
        (fmt.FROM_CHECK, b"true"),
        (fmt.FROM_CHECK, b"True"),
        (fmt.KEYS, b'["a", 1, {"b": [2]}, null]'),
        (fmt.KEYS, b'["a"] trailing'),
        (fmt.KEYS, b' [ "a" ] '),
        (fmt.KEYS, b"'a'"),
        (fmt.KEYS, b"k" * fmt.HEADER_BUDGET),
        (fmt.QUEUE_ID, b"1.5"),
        (fmt.QUEUE_ID, b" 7 "),
        (fmt.QUEUE_ID, b"\t3\n"),
        (fmt.QUEUE_ID, b"1024"),
        (fmt.TOPIC, b"RMQ_SYS_X"),
        (fmt.TOPIC, b"SCHEDULE_TOPIC_XXXX"),
        (fmt.TOPIC, b"%DLQ%g"),
        (fmt.TOPIC, b"T\n"),
        (fmt.CHECK_IMMUNITY_SECONDS, b"3601"),
        (fmt.CHECK_IMMUNITY_SECONDS, b"2147483648"),
        (fmt.CHECK_IMMUNITY_SECONDS, b"0"),
        (fmt.CHECK_IMMUNITY_SECONDS, b"60"),
        (fmt.BORN_AT, str(fmt.MAX_BORN_AT_MS).encode()),
        (fmt.BORN_AT, str(fmt.MAX_BORN_AT_MS + 1).encode()),
        (fmt.MSG_ID, b"x"),
        ("prop.", b"v"),
        ("prop.\x01", b"v"),
        ("prop.a", b"\xff"),
        ("prop.a", None),
        ("prop.é", b"v"),
        ("prop." + "p" * 256, b"v"),
        (fmt.KIND, b"TICK"),
        (fmt.KIND, b"tick"),
    ]
)


def drawn_rules(layout: TopicLayout) -> st.SearchStrategy[IngestRules]:
    """Limits as the configuration allows them (coordinator/core/config.py), edges first."""
    return st.builds(
        IngestRules,
        layout=st.just(layout),
        max_message_size=st.one_of(
            st.sampled_from([1, 2, MAX_MESSAGE]), st.integers(1, MAX_MESSAGE)
        ),
        default_queue_count=st.one_of(st.sampled_from([1, 4, 1024]), st.integers(1, 1024)),
        max_check_immunity_seconds=st.one_of(
            st.sampled_from([0, 3600, 2**31 - 1, 2**40]), st.integers(0, 2**40)
        ),
        # Auto-create on, or off with the valid halves' topic "T" allowed or not.
        allowed_topics=st.sampled_from([None, None, ("T",), ("T", "U"), ("U",)]),
        # The engine's principal: sometimes the one of an operator topic drawn as a source.
        engine_principal=st.sampled_from(["ANONYMOUS", "alice", "orders"]),
    )


def limit_headers(rules: IngestRules) -> st.SearchStrategy[tuple[str, bytes]]:
    """Headers just inside and just outside the limits of `rules`."""
    queues, immunity = rules.default_queue_count, rules.max_check_immunity_seconds
    return st.sampled_from(
        [
            (fmt.QUEUE_ID, str(queues - 1).encode()),
            (fmt.QUEUE_ID, str(queues).encode()),
            (fmt.CHECK_IMMUNITY_SECONDS, str(immunity).encode()),
            (fmt.CHECK_IMMUNITY_SECONDS, str(immunity + 1).encode()),
        ]
    )


@st.composite
def near_valid(draw: st.DrawFn, rules: IngestRules) -> dict[str, Any]:
    """A valid half or op with one or two headers replaced or added, its key or body changed."""
    kind = draw(st.sampled_from(["half", "op"]))
    headers: dict[str, Any] = dict(VALID[kind])
    edges = st.one_of(EDGE_HEADERS, limit_headers(rules))
    for name, value in draw(st.lists(st.one_of(header(), edges, edges), min_size=1, max_size=2)):
        headers[name] = value
    key = draw(st.sampled_from([b"tx-1"] * 8 + [None, b"", b"\xff", b"tx\n", b"x" * 129]))
    size = rules.max_message_size
    body = draw(st.sampled_from([b""] * 6 + [b"b" * size, b"b" * (size + 1), b"b" * (size - 1)]))
    return {"topic": kind, "key": key, "value": body, "headers": list(headers.items())}


@st.composite
def record(draw: st.DrawFn, rules: IngestRules) -> tuple[Any, ...]:
    """A raw record (mostly near valid) from one of the layout's sources, as a row."""
    raw = draw(st.one_of(raw_record(), *[near_valid(rules)] * 3))
    kind = draw(st.sampled_from(["half", "op", *[raw["topic"]] * 6, "other"]))
    source = draw(st.sampled_from(SOURCES[rules.layout.per_group][kind]))
    headers = raw["headers"]
    if draw(st.booleans()):  # an edge header on top: replacing, or now and then repeating
        extra = draw(EDGE_HEADERS)
        keep = draw(st.sampled_from([False] * 4 + [True]))
        headers = [h for h in headers if keep or h[0] != extra[0]] + [extra]
    headers = [(n, v.encode() if isinstance(v, str) else v) for n, v in headers]
    headers = draw(st.sampled_from([headers] * 8 + [None, []]))
    partition = draw(st.sampled_from([0, 3, 0xFFFF, 0x12345]))
    offset = draw(st.sampled_from([0, 17, 2**40, 2**63 - 1]))
    timestamp_type = draw(st.sampled_from([1] * 8 + [0, None]))
    return (
        raw["key"],
        raw["value"],
        source,
        partition,
        offset,
        datetime(2026, 1, 1),
        timestamp_type,
        headers,
    )


VALID = {
    "half": {fmt.PRODUCER_GROUP: b"orders", fmt.TOPIC: b"T"},
    "op": {fmt.PRODUCER_GROUP: b"orders", fmt.OP: b"COMMIT"},
}
#: Records every example ends with: a valid half, op and heartbeat, and a repeated header.
KNOWN = [
    ("half", b"tx-1", [(fmt.PRODUCER_GROUP, b"orders"), (fmt.TOPIC, b"T"), ("prop.a", b"1")]),
    ("op", b"tx-1", [(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, b"COMMIT")]),
    ("half", None, [(fmt.KIND, b"TICK")]),
    ("op", b"tx-2", [(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, b"COMMIT")] * 2),
]


def known(rules: IngestRules) -> list[tuple[Any, ...]]:
    """Return KNOWN as rows, from sources each kind is read from in the layout of `rules`."""
    group_topics = {"half": "txcoord.half.orders", "op": "txcoord.op.orders"}
    return [
        (key, b"", group_topics[kind] if rules.layout.per_group else SOURCES[False][kind][0],
         1, 100 + i, datetime(2026, 1, 1), 1, headers)
        for i, (kind, key, headers) in enumerate(KNOWN)
    ]  # fmt: skip


def rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in frame.collect()]


def generated(strategy: st.SearchStrategy[T], count: int) -> list[T]:
    """Return `count` values drawn by Hypothesis, one per example.

    One value per example (not one list of many): Hypothesis varies its examples widely,
    while the values of one example's list stay alike. The rules then run over all the
    records in one Spark job each.
    """
    found: list[T] = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(one=strategy)
    def draw(one: T) -> None:
        found.append(one)

    draw()
    return found[:count]


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_the_twin_agrees_with_the_rules(spark: SparkSession, layout: TopicLayout) -> None:
    for rules in generated(drawn_rules(layout), RULE_SETS):
        agree(spark, rules, generated(record(rules), 1500) + known(rules))


def agree(spark: SparkSession, rules: IngestRules, records: list[tuple[Any, ...]]) -> None:
    """Assert that both parse `records` under `rules` into the same rows."""
    frame = spark.createDataFrame(records, KAFKA_SCHEMA).coalesce(1)
    ours, reference = parse(frame, rules), reference_parse(frame, rules)
    assert ours.schema.simpleString() == reference.schema.simpleString()
    assert ours.columns == list(PARSED_COLUMNS)
    theirs = rows(reference)
    disagree = [
        (records[i], got, want)
        for i, (got, want) in enumerate(zip(rows(ours), theirs, strict=True))
        if got != want
    ]
    assert disagree == [], rules
    # The valid path was taken: the known records' verdicts are as written.
    assert [row["reason"] for row in theirs[-len(KNOWN) :]] == [None] * (len(KNOWN) - 1) + [
        "a header appears twice"
    ]
