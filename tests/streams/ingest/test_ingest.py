"""The ingest transforms on plain DataFrames shaped like Spark's Kafka source."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.core.topics import TopicLayout
from coordinator.protocol import ingress as fmt
from delta_tables import half_messages, op_records, quarantine
from streams.ingest.transforms import (
    IngestRules,
    classify,
    half_rows,
    halves,
    op_rows,
    ops,
    quarantined,
)

pytestmark = pytest.mark.spark

RULES = IngestRules(
    layout=TopicLayout(),
    max_message_size=64,
    default_queue_count=4,
    max_check_immunity_seconds=3600,
)
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
T0 = datetime(2026, 11, 22, 12, 0, 0)


def half_headers(**overrides: Any) -> list[tuple[str, bytes]]:
    headers = {fmt.PRODUCER_GROUP: b"orders", fmt.TOPIC: b"OrderPaid"}
    headers.update(overrides)
    return [(k, v) for k, v in headers.items() if v is not None]


def op_headers(op: bytes = b"COMMIT", **extra: bytes) -> list[tuple[str, bytes]]:
    return [(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, op), *extra.items()]


class Records:
    """Build a batch of Kafka-source rows with increasing offsets."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.rows: list[tuple[Any, ...]] = []

    def add(
        self,
        topic: str,
        key: bytes | None,
        headers: list[tuple[str, bytes]],
        *,
        value: bytes | None = b"body",
        timestamp_type: int = 1,
        partition: int = 0,
        at: timedelta = timedelta(0),
    ) -> Records:
        offset = len(self.rows)
        self.rows.append((key, value, topic, partition, offset, T0 + at, timestamp_type, headers))
        return self

    def classify(self, rules: IngestRules = RULES) -> DataFrame:
        frame = self.spark.createDataFrame(self.rows, KAFKA_SCHEMA)
        now = F.lit(datetime(2026, 11, 22, 12, 0, 1)).cast("timestamp")
        return classify(frame, rules, now).cache()


def reasons(classified: DataFrame) -> list[str | None]:
    return [row.reason for row in classified.orderBy("source_offset").collect()]


def test_a_valid_half_is_parsed_with_every_field(spark: SparkSession) -> None:
    headers = half_headers(
        **{
            fmt.QUEUE_ID: b"2",
            fmt.KEYS: json.dumps(["o-1", "o-2"]).encode(),
            fmt.TAGS: b"paid",
            fmt.CHECK_IMMUNITY_SECONDS: b"60",
            fmt.BORN_AT: b"1795000000000",
            "prop.region": b"eu",
            "prop.tier": "gold\u00e9".encode(),
        }
    )
    classified = Records(spark).add("txcoord.half", b"tx-1", headers).classify()
    (row,) = halves(classified, RULES).collect()
    assert row.kind == "HALF"
    assert (row.transaction_id, row.msg_id, row.producer_group) == (
        "tx-1",
        fmt.msg_id_of(0, 0),
        "orders",
    )
    assert (row.topic, row.queue_id, row.body) == ("OrderPaid", 2, bytearray(b"body"))
    assert row.keys == ["o-1", "o-2"]
    assert row.tags == "paid"
    assert row.properties == {"region": "eu", "tier": "gold\u00e9"}
    assert row.check_immunity_seconds == 60
    assert row.born_at == datetime.fromtimestamp(1795000000, UTC).replace(tzinfo=None)
    assert row.stored_at == T0
    assert [f.name for f in halves(classified, RULES).schema] == [
        f.name for f in half_messages.SCHEMA
    ]


def test_defaults_queue_from_the_transaction_id_and_msg_id_from_the_position(
    spark: SparkSession,
) -> None:
    records = Records(spark)
    for i in range(40):
        records.add("txcoord.half", f"tx-{i}".encode(), half_headers(), partition=3)
    rows = halves(records.classify(), RULES).collect()
    assert {r.queue_id for r in rows} == {0, 1, 2, 3}  # spread over default_queue_count
    again = halves(records.classify(), RULES).collect()
    assert [r.queue_id for r in rows] == [r.queue_id for r in again]  # deterministic
    assert rows[5].msg_id == "0003" + "5".rjust(16, "0")
    assert len({r.msg_id for r in rows}) == 40


def test_immunity_is_none_at_zero_and_kept_up_to_the_limit(spark: SparkSession) -> None:
    records = Records(spark)
    for value in (b"0", b"12", b"3600", b"0012"):
        records.add("txcoord.half", b"tx", half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: value}))
    rows = halves(records.classify(), RULES).orderBy("ingress_offset").collect()
    # "0012" is not how JSON writes 12: the REST would refuse it, so the Kafka path does too.
    assert [r.check_immunity_seconds for r in rows] == [None, 12, 3600]


def test_a_valid_op_is_parsed(spark: SparkSession) -> None:
    records = (
        Records(spark)
        .add("txcoord.op", b"tx-1", op_headers(b"ROLLBACK", **{fmt.FROM_CHECK: b"true"}))
        .add("txcoord.op", b"tx-2", op_headers(b"UNKNOWN"), partition=1)
    )
    classified = records.classify()
    rows = ops(classified, RULES).orderBy("ingress_offset").collect()
    assert [(r.op_id, r.transaction_id, r.op, r.from_check) for r in rows] == [
        ("op-0000-0000000000000000", "tx-1", "ROLLBACK", True),
        ("op-0001-0000000000000001", "tx-2", "UNKNOWN", False),
    ]
    assert [f.name for f in ops(classified, RULES).schema] == [f.name for f in op_records.SCHEMA]


BAD_HALVES: list[tuple[dict[str, Any], str]] = [
    (dict(key=None), "transaction id) is missing"),
    (dict(key=b"\xff\xfe"), "not valid UTF-8"),
    (dict(key=b"tx with\nnewline"), "printable ASCII"),
    (dict(key=b"x" * 129), "printable ASCII"),
    (dict(headers=[(fmt.TOPIC, b"OrderPaid")]), "producer_group is missing"),
    (dict(headers=half_headers(**{fmt.PRODUCER_GROUP: b"bad group"})), "must match"),
    (dict(headers=[(fmt.PRODUCER_GROUP, b"orders")]), "real topic) is missing"),
    (dict(headers=half_headers(**{fmt.TOPIC: b"../../etc"})), "1-127 characters"),
    (dict(headers=half_headers(**{fmt.TOPIC: b"x" * 128})), "1-127 characters"),
    (dict(headers=half_headers(**{fmt.TOPIC: b"RMQ_SYS_TRANS_HALF_TOPIC"})), "system topic"),
    (dict(headers=half_headers(**{fmt.QUEUE_ID: b"-1"})), "integer 0..1023"),
    (dict(headers=half_headers(**{fmt.QUEUE_ID: b"99999999999"})), "integer 0..1023"),
    (dict(headers=half_headers(**{fmt.QUEUE_ID: b"two"})), "integer 0..1023"),
    (dict(headers=half_headers(**{fmt.QUEUE_ID: b"\t+03\n"})), "integer 0..1023"),
    (dict(headers=half_headers(**{fmt.QUEUE_ID: b"+3"})), "integer 0..1023"),
    (dict(headers=half_headers(**{fmt.QUEUE_ID: b"007"})), "integer 0..1023"),
    (dict(headers=half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: b"05"})), "digits only"),
    (dict(value=b"x" * 65), "larger than max_message_size"),
    (dict(headers=half_headers(**{fmt.KEYS: b"not json"})), "JSON array of strings"),
    (dict(headers=half_headers(**{fmt.KEYS: b'["a", null]'})), "JSON array of strings"),
    (dict(headers=half_headers(**{fmt.KEYS: b'{"a": 1}'})), "JSON array of strings"),
    (dict(headers=half_headers(**{fmt.KEYS: b"[1, {}]"})), "JSON array of strings"),
    (dict(headers=half_headers(**{fmt.KEYS: b'["a", true]'})), "JSON array of strings"),
    (dict(headers=[*half_headers(), ("prop.x", None)]), "prop.* header value"),
    (dict(headers=half_headers(**{"prop.x": b"\xc3\x28"})), "prop.* header value"),
    (dict(headers=half_headers(**{"prop.": b"v"})), "no property name"),
    (dict(headers=half_headers(**{"prop.a\nb": b"v"})), "without control characters"),
    (dict(headers=half_headers(**{"prop." + "p" * 256: b"v"})), "1-255 characters"),
    (dict(headers=half_headers(**{fmt.MSG_ID: b"m-1"})), "msg id is always the record's"),
    (dict(headers=half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: b"-5"})), "digits only"),
    (dict(headers=half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: b"abc"})), "digits only"),
    (dict(headers=half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: b" 5"})), "digits only"),
    (dict(headers=half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: b"9" * 40})), "digits only"),
    (dict(headers=half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: b"3601"})), "max_check_immunity"),
    (dict(headers=half_headers(**{fmt.CHECK_IMMUNITY_SECONDS: b"\xff"})), "not valid UTF-8"),
    (dict(headers=half_headers(**{fmt.BORN_AT: b"3e14"})), "epoch milliseconds"),
    (dict(headers=half_headers(**{fmt.BORN_AT: b"-1"})), "epoch milliseconds"),
    (
        dict(headers=half_headers(**{fmt.BORN_AT: str(fmt.MAX_BORN_AT_MS + 1).encode()})),
        "epoch milliseconds",
    ),
    (dict(headers=half_headers(**{fmt.BORN_AT: b"9" * 40})), "epoch milliseconds"),
    (dict(headers=half_headers(**{fmt.TOPIC: b"OrderPaid\n"})), "1-127 characters"),
    (dict(headers=half_headers(**{fmt.TOPIC: b"OrderPaid\r\n"})), "1-127 characters"),
    (dict(headers=half_headers(**{fmt.PRODUCER_GROUP: b"orders\n"})), "must match"),
    (dict(key=b"tx-1\n"), "printable ASCII"),
    (
        dict(headers=half_headers(**{fmt.TAGS: b"t" * (fmt.HEADER_BUDGET - len(fmt.TAGS) + 1)})),
        "bytes together",
    ),
    (dict(headers=half_headers(**{"x-junk": b"j" * fmt.MAX_HEADER_BYTES})), "headers take"),
    (dict(headers=half_headers(**{fmt.TAGS: b"\xff"})), "txcoord.* header is not valid UTF-8"),
    (dict(headers=[*half_headers(), (fmt.TOPIC, b"Other")]), "a header appears twice"),
    (dict(headers=[*half_headers(), ("prop.a", b"1"), ("prop.a", b"2")]), "appears twice"),
    (dict(timestamp_type=0), "LogAppendTime"),
    (dict(headers=half_headers(**{fmt.KIND: b"HALF"})), "txcoord.kind must be TICK"),
]


def test_bad_halves_are_quarantined_with_the_reason(spark: SparkSession) -> None:
    """All cases in one batch (one Spark job, not one per case); each keeps its own reason."""
    records = Records(spark).add("txcoord.half", b"tx-good", half_headers())
    for change, _ in BAD_HALVES:
        args: dict[str, Any] = {"key": b"tx-1", "headers": half_headers(), **change}
        records.add("txcoord.half", args.pop("key"), args.pop("headers"), **args)
    classified = records.classify()
    found = {r.source_offset: r.reason for r in quarantined(classified).collect()}
    for offset, (change, reason) in enumerate(BAD_HALVES, start=1):
        assert reason in (found.get(offset) or ""), (change, found.get(offset))
    assert len(found) == len(BAD_HALVES)
    assert [r.transaction_id for r in halves(classified, RULES).collect()] == ["tx-good"]
    assert [f.name for f in quarantined(classified).schema] == [f.name for f in quarantine.SCHEMA]


def test_with_auto_create_off_only_the_configured_topics_are_accepted(
    spark: SparkSession,
) -> None:
    rules = replace(RULES, allowed_topics=("OrderPaid", "Refunds"))
    records = Records(spark).add("txcoord.half", b"tx-paid", half_headers())
    records.add("txcoord.half", b"tx-other", half_headers(**{fmt.TOPIC: b"Sprawl-1"}))
    classified = records.classify(rules)
    (refused,) = quarantined(classified).collect()
    assert refused.key == b"tx-other"
    assert "not one of the configured topics" in refused.reason
    assert [r.transaction_id for r in halves(classified, rules).collect()] == ["tx-paid"]
    # Auto-create on (the default): any topic.
    both = Records(spark).add("txcoord.half", b"tx-other", half_headers(**{fmt.TOPIC: b"S-1"}))
    assert quarantined(both.classify()).count() == 0


BAD_OPS = [
    ([(fmt.PRODUCER_GROUP, b"orders")], "txcoord.op is missing"),
    (op_headers(b"commit"), "COMMIT, ROLLBACK, UNKNOWN or RESUME"),
    (op_headers(b"ABORT"), "COMMIT, ROLLBACK, UNKNOWN or RESUME"),
    (op_headers(**{fmt.FROM_CHECK: b"yes"}), "true or false"),
    (op_headers(**{fmt.OPERATOR: b""}), "1-255 characters"),
    (op_headers(**{fmt.OPERATOR: b"o" * 256}), "1-255 characters"),
    (op_headers(**{fmt.REASON: b"why"}), "needs header txcoord.operator"),
    (op_headers(**{fmt.OPERATOR: b"o", fmt.REASON: b"r" * 4097}), "at most 4096"),
    (op_headers(**{fmt.BORN_AT: b"9223372036854775807"}), "epoch milliseconds"),
    ([(fmt.PRODUCER_GROUP, b"orders\n"), (fmt.OP, b"COMMIT")], "must match"),
    ([(fmt.OP, b"COMMIT")], "producer_group is missing"),
]


def test_bad_ops_are_quarantined(spark: SparkSession) -> None:
    records = Records(spark)
    for headers, _ in BAD_OPS:
        records.add("txcoord.op", b"tx-1", headers)
    classified = records.classify()
    found = {r.source_offset: r.reason for r in quarantined(classified).collect()}
    for offset, (headers, reason) in enumerate(BAD_OPS):
        assert reason in (found.get(offset) or ""), (headers, found.get(offset))
    assert ops(classified, RULES).count() == 0


def test_ticks_become_one_heartbeat_per_topic(spark: SparkSession) -> None:
    tick = [(fmt.KIND, b"TICK")]
    classified = (
        Records(spark)
        .add("txcoord.half", None, tick, value=None, partition=0, at=timedelta(seconds=1))
        .add("txcoord.half", None, tick, value=None, partition=1, at=timedelta(seconds=3))
        .add("txcoord.op", None, tick, value=None, partition=0, at=timedelta(seconds=2))
        .add("txcoord.half", b"tx-1", half_headers())
        .classify()
    )
    assert quarantined(classified).count() == 0
    assert halves(classified, RULES).count() == 1  # heartbeats are not halves
    assert ops(classified, RULES).count() == 0
    # The newest heartbeat of each kind rides with the landed rows, as a row of kind TICK.
    landed = classified.toArrow()
    (half_tick,) = [
        r for r in half_rows(landed).to_pylist() if r["kind"] == half_messages.KIND_TICK
    ]
    assert half_tick["transaction_id"] == half_messages.HEARTBEAT_ID
    assert (half_tick["stored_at"], half_tick["ingress_partition"]) == (
        T0.replace(tzinfo=UTC) + timedelta(seconds=3),
        1,
    )
    assert half_tick["msg_id"] is None and half_tick["body"] is None  # times and position only
    (op_tick,) = [r for r in op_rows(landed).to_pylist() if r["kind"] == op_records.KIND_TICK]
    assert op_tick["stored_at"] == T0.replace(tzinfo=UTC) + timedelta(seconds=2)


PER_GROUP = replace(RULES, layout=TopicLayout(per_group=True), engine_principal="txcoord-engine")


def test_per_group_topics_carry_only_their_groups_records(spark: SparkSession) -> None:
    # The broker let each producer write only its own group's topics (coordinator/core/topics.py):
    # the topic is the proof of the group, and an operator's op counts only from its own topic;
    # the shared topics carry heartbeats only, and the engine's own operator topic (the REST
    # ingress's) takes the operator header as written.
    records = (
        Records(spark)
        .add("txcoord.half.orders", b"tx-1", half_headers())
        .add("txcoord.half.orders", b"tx-2", half_headers(**{fmt.PRODUCER_GROUP: b"payments"}))
        .add("txcoord.op.orders", b"tx-1", op_headers())
        .add("txcoord.op.orders", b"tx-3", op_headers(**{fmt.OPERATOR: b"mallory"}))
        .add("txcoord.operator.ops-admin", b"tx-4", op_headers(**{fmt.OPERATOR: b"alice"}))
        .add("txcoord.operator.ops-admin", b"tx-5", op_headers(**{fmt.OPERATOR: b"ops-admin"}))
        .add("txcoord.operator.ops-admin", b"tx-6", op_headers())
        .add("txcoord.op", b"tx-7", op_headers(**{fmt.OPERATOR: b"rest-admin"}))
        .add("txcoord.half", b"tx-8", half_headers())
        .add("txcoord.op", b"tx-9", op_headers())
        .add("txcoord.operator.txcoord-engine", b"tx-10", op_headers(**{fmt.OPERATOR: b"a (B)"}))
        .add("txcoord.half", None, [(fmt.KIND, b"TICK")])
        .add("txcoord.op", None, [(fmt.KIND, b"TICK")])
    )
    classified = records.classify(PER_GROUP)
    found = reasons(classified)
    assert found[0] is None and found[2] is None
    assert found[1] is not None and "another group" in found[1]
    assert found[3] is not None and found[3].startswith("refused: an operator's op")
    assert found[6] == f"an op on an operator topic must carry header {fmt.OPERATOR}"
    shared = "refused: in the per-group layout (topics_per_group = true) the shared topics"
    assert [(found[i] or "")[: len(shared)] for i in (7, 8, 9)] == [shared] * 3, found
    assert found[4] is None and found[5] is None and found[10] is None
    assert found[11] is None and found[12] is None  # the heartbeats
    ops_by_id = {r.transaction_id: r for r in ops(classified, PER_GROUP).collect()}
    assert sorted(ops_by_id) == ["tx-1", "tx-10", "tx-4", "tx-5"]
    assert ops_by_id["tx-4"].operator == "ops-admin (alice)"  # the principal, then the name
    assert ops_by_id["tx-5"].operator == "ops-admin"
    assert ops_by_id["tx-10"].operator == "a (B)"  # the engine's own topic: the header
    assert ops_by_id["tx-1"].operator is None
    assert [r.transaction_id for r in halves(classified, PER_GROUP).collect()] == ["tx-1"]


def test_the_shared_layout_ignores_what_looks_like_a_group_topic(spark: SparkSession) -> None:
    # With shared topics no topic names a group: a topic the source was not subscribed to
    # is neither a half nor an op (and cannot vouch for a group).
    classified = Records(spark).add("txcoord.half.orders", b"tx-1", half_headers()).classify()
    assert halves(classified, RULES).count() == 0
    assert classified.first().ingress_kind is None
