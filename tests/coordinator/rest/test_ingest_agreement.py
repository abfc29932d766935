"""The REST and the Spark side agree: what the REST writes, the ingest accepts as it is;
ids derive the same way; and what Spark writes to Delta, the REST reads without a JVM."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from coordinator.core.topics import TopicLayout
from coordinator.protocol import ingress as fmt
from coordinator.rest.errors import ApiError
from coordinator.rest.models import OpRequest, SendRequest
from coordinator.rest.records import HEADER_BUDGET, Record, half_record, op_record
from delta_tables import half_messages, transactions
from delta_tables.lookup import DeltaRows, TransactionLookup
from delta_tables.registry import create_system_tables
from streams.ingest.transforms import IngestRules, classify, halves, ops

pytestmark = pytest.mark.spark

MAX_MESSAGE = 1024
RULES = IngestRules(
    layout=TopicLayout(half="h", op="o"),
    max_message_size=MAX_MESSAGE,
    default_queue_count=4,
    max_check_immunity_seconds=3600,
)
KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
#: Requests at the edges of every rule the REST accepts.
EDGE_HALVES: list[dict[str, Any]] = [
    {"producer_group": "g", "topic": "T"},
    {"producer_group": "Az09_-" + "g" * 249, "topic": "Az09_-" + "t" * 121,
     "queue_id": 1023, "transaction_id": "!" + " ~" * 63 + "x", "body": "é" * (MAX_MESSAGE // 2),
     "check_immunity_seconds": RULES.max_check_immunity_seconds},
    {"producer_group": "g", "topic": "T", "queue_id": 0, "body_base64": "AP8=",
     "check_immunity_seconds": 0, "transaction_id": "a/b?c#d", "tags": ""},
    {"producer_group": "g", "topic": "T", "keys": ['quote"', "back\\slash", "ünï", "", "\x00nul"],
     "tags": "标签 \t tab", "properties": {"région": "ü", "with space": "", "x.y-z": "\x7f"}},
    {"producer_group": "g", "topic": "T", "keys": [],
     # Exactly the header budget: the keys header ("[]") and one property.
     "properties": {"p": "v" * (HEADER_BUDGET - len(fmt.KEYS) - 2 - len("prop.p"))}},
]  # fmt: skip
EDGE_OPS: list[tuple[str, dict[str, Any]]] = [
    ("COMMIT", {"producer_group": "g"}),
    ("ROLLBACK", {"producer_group": "g", "from_check": True}),
    ("UNKNOWN", {"producer_group": "g", "from_check": False}),
    ("COMMIT", {"producer_group": "g", "operator": "ops", "reason": "paid by phone ü"}),
]


def kafka_rows(topic: str, records: list[Record], partition: int) -> list[tuple[Any, ...]]:
    now = datetime(2026, 1, 1, 12, 0, 0)
    return [
        (r.key, r.value, topic, partition, 0x10 + i, now, 1, r.headers)
        for i, r in enumerate(records)
    ]


def test_nothing_the_rest_accepts_is_quarantined(spark: SparkSession) -> None:
    sent = [SendRequest.model_validate(h) for h in EDGE_HALVES]
    half_records = [
        half_record(r, r.transaction_id or f"tx-{i}", MAX_MESSAGE, 1) for i, r in enumerate(sent)
    ]
    op_records = [
        op_record(f"tx-{i}", op, OpRequest.model_validate(body), 1)
        for i, (op, body) in enumerate(EDGE_OPS)
    ]
    frame = spark.createDataFrame(
        kafka_rows("h", half_records, 3) + kafka_rows("o", op_records, 5), KAFKA_SCHEMA
    )
    classified = classify(frame, RULES, F.current_timestamp()).cache()
    assert [r.reason for r in classified.collect()] == [None] * (len(sent) + len(EDGE_OPS))

    landed = sorted(halves(classified, RULES).collect(), key=lambda r: r.ingress_offset)
    for request, record, row in zip(sent, half_records, landed, strict=True):
        assert row.transaction_id == record.key.decode()
        assert row.msg_id == fmt.msg_id_of(3, row.ingress_offset)
        assert row.producer_group == request.producer_group
        assert row.topic == request.topic
        assert bytes(row.body) == request.body_bytes
        assert row.keys == request.keys
        assert row.tags == request.tags
        assert (row.properties or {}) == (request.properties or {})
        if request.queue_id is not None:
            assert row.queue_id == request.queue_id
        immunity = request.check_immunity_seconds
        assert row.check_immunity_seconds == (immunity if immunity else None)
    decided = sorted(ops(classified, RULES).collect(), key=lambda r: r.ingress_offset)
    for (op, body), row in zip(EDGE_OPS, decided, strict=True):
        assert row.op_id == fmt.op_id_of(5, row.ingress_offset)
        assert row.op == op
        assert row.from_check == body.get("from_check", False)
        assert row.operator == body.get("operator")
        assert row.reason == body.get("reason")


def test_the_rest_reads_tables_that_spark_wrote(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "warehouse")
    create_system_tables(spark, warehouse)
    lookup = TransactionLookup(DeltaRows(warehouse))
    assert lookup.state("tx-1") is None  # tables exist, empty

    stored = datetime(2026, 1, 1, 12, 0, 0, 250_000)  # session time zone is UTC
    half_row = (
        "HALF",
        "tx-1",
        "MSG-1",
        "orders",
        "OrderPaid",
        2,
        b"b",
        ["k"],
        "t",
        {"p": "v"},
        None,
        None,
        stored,
        0,
        5,
        stored,
    )
    spark.createDataFrame([half_row], half_messages.SCHEMA).write.format("delta").mode(
        "append"
    ).save(half_messages.TABLE.path(warehouse))
    state = lookup.state("tx-1")
    assert state is not None
    assert (state.state, state.prepared_at, state.queue_id) == (
        "PREPARED",
        "2026-01-01T12:00:00.250Z",
        2,
    )

    resolved = datetime(2026, 1, 1, 12, 0, 9)
    final_row = (
        "tx-1",
        "MSG-1",
        "orders",
        "OrderPaid",
        2,
        "COMMITTED",
        "op",
        0,
        "op-1",
        stored,
        resolved,
        1,
    )
    spark.createDataFrame([final_row], transactions.SCHEMA).write.format("delta").mode(
        "append"
    ).save(transactions.TABLE.path(warehouse))
    state = lookup.state("tx-1")
    assert state is not None
    assert (state.state, state.resolved_at, state.reason) == (
        "COMMITTED",
        "2026-01-01T12:00:09.000Z",
        "op",
    )
    assert json.loads(state.model_dump_json())["check_count"] == 0


#: Kafka halves at the edges of the REST's rules, written by hand as a producer might.
KAFKA_EDGE_HALVES: list[list[tuple[str, bytes | None]]] = [
    [(fmt.QUEUE_ID, b"\t+03\n")], [(fmt.QUEUE_ID, b"+3")], [(fmt.QUEUE_ID, b" 7 ")],
    [(fmt.QUEUE_ID, b"0007")], [(fmt.QUEUE_ID, b"1023")], [(fmt.QUEUE_ID, b"3.0")],
    [(fmt.KEYS, b"[1, {}]")], [(fmt.KEYS, b'["a", 1]')], [(fmt.KEYS, b'["a", true]')],
    [(fmt.KEYS, b'[["a"]]')], [(fmt.KEYS, b"[]")], [(fmt.KEYS, b' [ "a" , "b" ] ')],
    [("prop.a", None)], [("prop.a", b"")], [("prop.a", b"null")],
    [(fmt.CHECK_IMMUNITY_SECONDS, b"+5")], [(fmt.CHECK_IMMUNITY_SECONDS, b"0")],
]  # fmt: skip


def as_rest_request(headers: list[tuple[str, bytes | None]]) -> dict[str, Any]:
    """Return the REST request body a half with these headers stands for: each header's
    text as the JSON field the REST ingress would have written it from."""
    body: dict[str, Any] = {"producer_group": "g", "topic": "T"}
    for name, raw in headers:
        text = None if raw is None else raw.decode()
        if name.startswith(fmt.PROPERTY_PREFIX):
            body.setdefault("properties", {})[name[len(fmt.PROPERTY_PREFIX) :]] = text
        else:
            field = {fmt.QUEUE_ID: "queue_id", fmt.KEYS: "keys",
                     fmt.CHECK_IMMUNITY_SECONDS: "check_immunity_seconds"}[name]  # fmt: skip
            try:
                body[field] = json.loads(text or "")
            except json.JSONDecodeError:
                body[field] = text  # not JSON: the REST cannot carry it as a number or a list
    return body


def rest_accepts(body: dict[str, Any]) -> bool:
    try:
        SendRequest.model_validate(body)
    except ValueError:
        return False
    return True


def test_nothing_the_rest_refuses_is_accepted_from_kafka(spark: SparkSession) -> None:
    """One rule for both ingresses, the other way round: a Kafka half the REST could not
    have sent is quarantined. Before: `\\t+03\\n` became queue 3, `[1, {}]` the keys
    `["1", "{}"]`, a property without a value the text "null"."""
    base = [(fmt.PRODUCER_GROUP, b"g"), (fmt.TOPIC, b"T")]
    rows = [
        (b"tx-%d" % i, b"", "h", 3, 0x10 + i, datetime(2026, 1, 1), 1, base + extra)
        for i, extra in enumerate(KAFKA_EDGE_HALVES)
    ]
    classified = classify(spark.createDataFrame(rows, KAFKA_SCHEMA), RULES, F.current_timestamp())
    reasons = [r.reason for r in sorted(classified.collect(), key=lambda r: r.source_offset)]
    accepted_by_kafka = [
        extra for extra, reason in zip(KAFKA_EDGE_HALVES, reasons, strict=True) if reason is None
    ]
    assert [e for e in accepted_by_kafka if not rest_accepts(as_rest_request(e))] == []
    # And no more refused than needed: the REST's accepted cases pass here too, but for
    # spaces around a number (JSON allows them around a value, the header's digits do not).
    assert accepted_by_kafka == [
        [(fmt.QUEUE_ID, b"1023")], [(fmt.KEYS, b"[]")], [(fmt.KEYS, b' [ "a" , "b" ] ')],
        [("prop.a", b"")], [("prop.a", b"null")], [(fmt.CHECK_IMMUNITY_SECONDS, b"0")],
    ]  # fmt: skip
    assert rest_accepts(as_rest_request([(fmt.QUEUE_ID, b" 7 ")]))


def test_with_auto_create_off_both_ingresses_take_the_same_topics(spark: SparkSession) -> None:
    allowed = ("T", "U")
    rules = replace(RULES, allowed_topics=allowed)
    topics = ["T", "U", "Other", "t"]
    rest_accepts = {}
    records = []
    for i, topic in enumerate(topics):
        request = SendRequest.model_validate({"producer_group": "g", "topic": topic})
        try:
            half_record(request, f"tx-{i}", MAX_MESSAGE, 1, allowed_topics=allowed)
            rest_accepts[topic] = True
        except ApiError as exc:
            assert (exc.status, exc.code) == (400, "topic_not_allowed")
            rest_accepts[topic] = False
        # What a Kafka producer writes for the same request, whatever the REST said.
        records.append(half_record(request, f"tx-{i}", MAX_MESSAGE, 1))
    frame = spark.createDataFrame(kafka_rows("h", records, 3), KAFKA_SCHEMA)
    classified = classify(frame, rules, F.current_timestamp()).collect()
    by_id = {row.transaction_id: row.reason is None for row in classified}
    ingest_accepts = {topic: by_id[f"tx-{i}"] for i, topic in enumerate(topics)}
    assert rest_accepts == ingest_accepts == {"T": True, "U": True, "Other": False, "t": False}
