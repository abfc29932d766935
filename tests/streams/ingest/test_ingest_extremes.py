"""Extreme ingress records against the real broker and the real ingest (contract 7.9, 9).

Each record here once did worse than get quarantined: it stopped the stream (a born_at that
overflows a timestamp), landed and later broke a reader (a born_at past year 2262), passed a
name rule with a trailing newline, claimed another message's msg id, or set a check timer
decades out. Every one must end in `system/quarantine` with a clear reason, the stream must
keep running, and the valid records around them must land.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable
from kafka import KafkaProducer
from pyspark.sql import SparkSession

from coordinator.admin import inventory
from coordinator.core.config import Config
from coordinator.protocol import ingress as fmt
from delta_tables import half_messages, op_records, quarantine
from delta_tables.registry import create_system_tables
from streams.ingest.landing_query import start_ingest
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

Headers = dict[str, bytes]


def half(**headers: bytes) -> Headers:
    return {fmt.PRODUCER_GROUP: b"orders", fmt.TOPIC: b"OrderPaid", **headers}


def op(**headers: bytes) -> Headers:
    return {fmt.PRODUCER_GROUP: b"orders", fmt.OP: b"COMMIT", **headers}


#: (topic: "half" | "op", key, headers, a part of the quarantine reason)
BAD: list[tuple[str, bytes, Headers, str]] = [
    ("half", b"tx-b1", half(**{fmt.BORN_AT: b"9223372036854775807"}), fmt.BORN_AT),
    ("half", b"tx-b2", half(**{fmt.BORN_AT: b"300000000000000"}), fmt.BORN_AT),
    ("half", b"tx-b3", half(**{fmt.BORN_AT: b"3e14"}), fmt.BORN_AT),
    ("half", b"tx-b4", half(**{fmt.BORN_AT: b"-1"}), fmt.BORN_AT),
    ("half", b"tx-b5", half(**{fmt.BORN_AT: b"253402300800000"}), fmt.BORN_AT),
    ("half", b"tx-b7", half(**{fmt.BORN_AT: str(fmt.MAX_BORN_AT_MS + 1).encode()}), fmt.BORN_AT),
    ("op", b"tx-b6", op(**{fmt.BORN_AT: b"-9223372036854775808"}), fmt.BORN_AT),
    ("half", b"tx-n1", half(**{fmt.TOPIC: b"OrderPaid\n"}), "real topic must be"),
    ("half", b"tx-n2", half(**{fmt.PRODUCER_GROUP: b"orders\n"}), fmt.PRODUCER_GROUP),
    ("half", b"tx-n3\n", half(), "transaction id"),
    ("op", b"tx-n4", op(**{fmt.PRODUCER_GROUP: b"orders\n"}), fmt.PRODUCER_GROUP),
    ("half", b"tx-m1", half(**{fmt.MSG_ID: b"00000000000000000000"}), fmt.MSG_ID),
    ("half", b"tx-i1", half(**{fmt.CHECK_IMMUNITY_SECONDS: b"2147483647"}), "max_check_immunity"),
    ("half", b"tx-i2", half(**{fmt.CHECK_IMMUNITY_SECONDS: b"99999999999999999999"}),
     fmt.CHECK_IMMUNITY_SECONDS),
    ("half", b"tx-i3", half(**{fmt.CHECK_IMMUNITY_SECONDS: b"soon"}), fmt.CHECK_IMMUNITY_SECONDS),
    ("half", b"tx-i4", half(**{fmt.CHECK_IMMUNITY_SECONDS: b"-5"}), fmt.CHECK_IMMUNITY_SECONDS),
    ("half", b"tx-t1", half(**{fmt.TAGS: b"t" * (fmt.HEADER_BUDGET + 1)}), "bytes together"),
    ("half", b"tx-p1", half(**{"prop.a\x01b": b"v"}), "property name"),
    ("op", b"tx-o1", op(**{fmt.OPERATOR: b"o" * (fmt.MAX_OPERATOR_LENGTH + 1)}), fmt.OPERATOR),
    ("op", b"tx-o2", op(**{fmt.OPERATOR: b"ops", fmt.REASON: b"r" * (fmt.MAX_REASON_LENGTH + 1)}),
     fmt.REASON),
    ("op", b"tx-o3", op(**{fmt.REASON: b"why"}), fmt.OPERATOR),
    ("op", b"tx-h1", op(**{f"x-{i}": b"v" * 1000 for i in range(fmt.MAX_HEADER_BYTES // 1000 + 1)}),
     "headers take"),
]  # fmt: skip

#: Valid records at the edges of the same rules: they land.
GOOD: list[tuple[str, bytes, Headers]] = [
    ("half", b"tx-g1", half(**{fmt.BORN_AT: str(fmt.MAX_BORN_AT_MS).encode()})),
    ("half", b"tx-g2", half(**{fmt.BORN_AT: b"0", fmt.CHECK_IMMUNITY_SECONDS: b"3600"})),
    ("half", b"tx-g3", half(**{fmt.TAGS: b"t" * (fmt.HEADER_BUDGET - len(fmt.TAGS))})),
    ("op", b"tx-g1", op(**{fmt.OPERATOR: "ö".encode() * fmt.MAX_OPERATOR_LENGTH,
                           fmt.REASON: b"r" * fmt.MAX_REASON_LENGTH})),
]  # fmt: skip


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(max_check_immunity="1h")


def send_all(
    config: Config, records: list[tuple[str, bytes, Headers]]
) -> list[tuple[str, int, int]]:
    """Send the records one by one; return each one's (source topic, metadata)."""
    producer = KafkaProducer(
        bootstrap_servers=config.kafka.bootstrap_servers, acks="all", max_request_size=4 << 20
    )
    topics = {"half": config.kafka.half_topic, "op": config.kafka.op_topic}
    sent = []
    try:
        for which, key, headers in records:
            future = producer.send(
                topics[which],
                key=key,
                value=b"body" if which == "half" else b"",
                headers=list(headers.items()),
            )
            sent.append(future.get(timeout=60))
    finally:
        producer.close()
    return [(m.topic, m.partition, m.offset) for m in sent]


def test_extreme_records_are_quarantined_and_the_stream_keeps_running(
    spark: SparkSession, config: Config
) -> None:
    ensure_ingress_topics(config)
    create_system_tables(spark, config.warehouse)
    bad = send_all(config, [(t, k, h) for t, k, h, _ in BAD])
    good = send_all(config, GOOD)

    for _ in range(2):  # a restart must not find a batch it cannot get past
        query = start_ingest(spark, config, available_now=True)
        try:
            query.awaitTermination(300)
        finally:
            query.stop()
        assert query.exception() is None, query.exception()

    found = {
        (r.source_topic, r.source_partition, r.source_offset): r.reason
        for r in spark.read.format("delta").load(quarantine.TABLE.path(config.warehouse)).collect()
    }
    for position, (_, key, _, reason) in zip(bad, BAD, strict=True):
        assert reason in (found.get(position) or ""), (key, found.get(position))
    assert len(found) == len(BAD), found

    # Every table reads back without a JVM: no timestamp beyond what Python can hold.
    landed = {
        (topic, r["ingress_partition"], r["ingress_offset"])
        for topic, name in (
            (config.kafka.half_topic, half_messages.TABLE.name),
            (config.kafka.op_topic, op_records.TABLE.name),
        )
        for r in DeltaTable(f"{config.warehouse}/{name}").to_pyarrow_table().to_pylist()
        if r["transaction_id"] != half_messages.HEARTBEAT_ID
    }
    assert landed == set(good)
    described = inventory.describe(config.warehouse, "tx-g1")
    assert described is not None and described.state.msg_id is not None
    assert json.dumps([e.what for e in described.history])


def test_describe_reads_a_half_whose_born_at_no_reader_can_hold(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A born_at past 2262 that landed before the ingest refused it: describe still answers."""
    warehouse = str(tmp_path / "warehouse")
    create_system_tables(spark, warehouse)
    stored = datetime(2026, 1, 1, 12, 0, 0)
    row = (
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
        datetime(9999, 12, 31, 23, 59, 59),
        stored,
        0,
        5,
        stored,
    )
    spark.createDataFrame([row], half_messages.SCHEMA).write.format("delta").mode("append").save(
        half_messages.TABLE.path(warehouse)
    )
    described = inventory.describe(warehouse, "tx-1")
    assert described is not None
    assert described.state.state == "PREPARED"
    assert [e.what for e in described.history] == ["half MSG-1 for OrderPaid/2 from group orders"]
