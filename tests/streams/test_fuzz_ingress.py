"""A fuzzed flood of raw Kafka records while a normal workload runs (SPEC 7.9).

Hypothesis generates raw records (random and extreme headers, keys and values: invalid UTF-8,
huge numbers, empty and oversize fields, repeated headers, names with trailing newlines, and
records one field away from valid) and sends them straight to the ingress topics while a
workload of another producer group runs through the real coordinator query. Afterwards:
the stream is still up, every fuzzed record is accounted for by its (topic, partition,
offset) in `system/quarantine` or in the table it belongs to, and the workload ended exactly
as it does without the flood. Fuzzed records never carry `txcoord.kind: TICK` exactly: valid
heartbeats are collapsed to one per batch by design, so they would not be countable.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer
from pyspark.sql import SparkSession

from core.config import Config
from protocol import ingress as fmt
from tests.harness import TOPIC, Engine, Producer, Responder, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

MAX_MESSAGE = 64 * 1024
#: The workload's group: the fuzz never uses it, so nothing fuzzed may touch its transactions.
GROUP = "workload"
FUZZ_GROUPS = [b"orders", b"g", b"orders\n", b"%|A-z_-", b"", b"x" * 256, b"\xff"]
COMMITS, ROLLBACKS, CHECKED = ["c0", "c1", "c2"], ["r0", "r1"], ["k0"]

NUMBERS = [
    b"0",
    b"1",
    b"-1",
    b"3600",
    b"3601",
    b"2147483647",
    b"9223372036854775807",
    b"-9223372036854775808",
    b"99999999999999999999999",
    b"300000000000000",
    b"3e14",
    b"1e999",
    b"NaN",
    b" 5",
    b"5 ",
    b"+5",
    b"0x10",
    b"1.5",
    b"",
    b"\xff\xfe",
    b"253402300800000",
    str(fmt.MAX_BORN_AT_MS).encode(),
    b"1023",
    b"1024",
    b"007",
]
NAMES = [
    fmt.PRODUCER_GROUP,
    fmt.TOPIC,
    fmt.QUEUE_ID,
    fmt.MSG_ID,
    fmt.KEYS,
    fmt.TAGS,
    fmt.CHECK_IMMUNITY_SECONDS,
    fmt.BORN_AT,
    fmt.OP,
    fmt.FROM_CHECK,
    fmt.OPERATOR,
    fmt.REASON,
    fmt.KIND,
    "prop.",
    "prop.a",
    "prop.a\nb",
    "prop." + "p" * 300,
    "x-other",
    "",
    "txcoord.unknown",
]
WORDS = [
    b"COMMIT",
    b"ROLLBACK",
    b"UNKNOWN",
    b"RESUME",
    b"commit",
    b"COMMIT\n",
    b"true",
    b"false",
    b"TICK\n",
    b"HALF",
    b"OrderPaid",
    b"OrderPaid\n",
    b"../x",
    b"system",
    b"RMQ_SYS_X",
    b'["k"]',
    b"[null]",
    b"[[[[[]]]]]",
    b'{"a": 1}',
    b"[" * 500,
    b"ops",
]


def value_bytes() -> st.SearchStrategy[bytes]:
    big = st.sampled_from([b"v" * fmt.HEADER_BUDGET, b"\x00" * 70_000, b"9" * 5000])
    return st.one_of(st.sampled_from(NUMBERS + WORDS + FUZZ_GROUPS), st.binary(max_size=40),
                     st.text(max_size=40).map(str.encode), big)  # fmt: skip


def header() -> st.SearchStrategy[tuple[str, bytes]]:
    names = st.one_of(st.sampled_from(NAMES), st.text(max_size=20))
    return st.tuples(names, value_bytes())


def near_valid(topic: str) -> st.SearchStrategy[list[tuple[str, bytes]]]:
    """The headers of a valid half or op with a few replaced or added."""
    base = ([(fmt.PRODUCER_GROUP, b"orders"), (fmt.TOPIC, TOPIC.encode())] if topic == "half"
            else [(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, b"COMMIT")])  # fmt: skip

    def mutate(extra: list[tuple[str, bytes]], replace: bool) -> list[tuple[str, bytes]]:
        if replace:
            names = {name for name, _ in extra}
            return [h for h in base if h[0] not in names] + extra
        return base + extra

    return st.builds(mutate, st.lists(header(), max_size=3), st.booleans())


@st.composite
def raw_record(draw: st.DrawFn) -> dict[str, Any]:
    topic = draw(st.sampled_from(["half", "op"]))
    headers = draw(st.one_of(st.lists(header(), max_size=12), near_valid(topic)))
    key = draw(st.one_of(st.none(), st.sampled_from([b"fz-1", b"fz-1\n", b"", b"\xff", b"x" * 200]),
                         st.binary(max_size=30)))  # fmt: skip
    value = draw(st.one_of(st.none(), st.binary(max_size=64),
                           st.just(b"b" * (MAX_MESSAGE + 1))))  # fmt: skip
    # Never exactly a valid heartbeat (see the module docstring).
    headers = [(n, b"TICK\n" if n == fmt.KIND and v == b"TICK" else v) for n, v in headers]
    if key is None and value is None:  # kafka-python refuses a record with neither
        value = b""
    return {"topic": topic, "key": key, "value": value, "headers": headers}


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s", transaction_check_interval="10s", transaction_check_max="4",
        max_message_size=str(MAX_MESSAGE),
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )  # fmt: skip


def positions(spark: SparkSession, config: Config) -> set[tuple[str, int, int]]:
    """Return the (topic, partition, offset) of every record in quarantine or a table."""
    found = {(r.source_topic, r.source_partition, r.source_offset)
             for r in table(spark, config, "system/quarantine").collect()}  # fmt: skip
    for topic, name in ((config.kafka.half_topic, "system/half_messages"),
                        (config.kafka.op_topic, "system/op_records")):  # fmt: skip
        rows = table(spark, config, name).where("kind != 'TICK'").collect()
        found |= {(topic, r.ingress_partition, r.ingress_offset) for r in rows}
    return found


def test_a_fuzzed_flood_stops_nothing_and_changes_nothing(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    producer = Producer(config)

    def answer(request: dict[str, Any]) -> None:
        # Answered here, in the workload's group (the harness's responder answers as "orders").
        if request["producer_group"] == GROUP and request["transaction_id"] in CHECKED:
            producer.op(request["transaction_id"], "COMMIT", group=GROUP, from_check=True)
            producer.flush()

    responder = Responder(config, answer, group=GROUP)
    fuzzer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, acks="all",
                           max_request_size=4 << 20)  # fmt: skip
    topics = {"half": config.kafka.half_topic, "op": config.kafka.op_topic}
    fuzzed: list[tuple[str, int, int]] = []

    @settings(max_examples=25, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(records=st.lists(raw_record(), min_size=1, max_size=12))
    def flood(records: list[dict[str, Any]]) -> None:
        futures = [fuzzer.send(topics[r["topic"]], key=r["key"], value=r["value"],
                               headers=r["headers"]) for r in records]  # fmt: skip
        for future in futures:
            stored = future.get(timeout=60)
            fuzzed.append((stored.topic, stored.partition, stored.offset))

    try:
        for tx in COMMITS + ROLLBACKS + CHECKED:
            producer.half(tx, group=GROUP)
        producer.flush()
        flood()  # while the halves are ingested
        for tx in COMMITS:
            producer.op(tx, "COMMIT", group=GROUP)
        for tx in ROLLBACKS:
            producer.op(tx, "ROLLBACK", group=GROUP)
        producer.flush()
        flood()  # while the ops are ingested and the check is answered

        def settled() -> bool:
            finals = table(spark, config, "system/transactions").where(
                f"producer_group = '{GROUP}'"
            )
            return finals.count() == len(COMMITS + ROLLBACKS + CHECKED)

        wait_for(settled, 300, "the workload to settle")
        wait_for(lambda: set(fuzzed) <= positions(spark, config), 120, "every fuzzed record")
    finally:
        fuzzer.close()
        producer.close()
        responder.stop()

    assert engine.coordinator is not None and engine.coordinator.isActive, engine.coordinator
    assert len(fuzzed) > 50  # the flood was a flood
    ended = table(spark, config, "system/transactions").where(f"producer_group = '{GROUP}'")
    finals = sorted((r.transaction_id, r.state, r.reason) for r in ended.collect())
    assert finals == sorted(
        [(tx, "COMMITTED", "op") for tx in COMMITS]
        + [(tx, "ROLLED_BACK", "op") for tx in ROLLBACKS]
        + [(tx, "COMMITTED", "check") for tx in CHECKED]
    )
    delivered = table(spark, config, f"topics/{TOPIC}").where(f"producer_group = '{GROUP}'")
    assert sorted((r.transaction_id, bytes(r.body), r.keys) for r in delivered.collect()) == [
        (tx, f"body-{tx}".encode(), [tx]) for tx in sorted(COMMITS + CHECKED)
    ]
    offsets = sorted((r.queue_id, r.queue_offset) for r in table(
        spark, config, f"topics/{TOPIC}").collect())  # fmt: skip
    assert len(offsets) == len(set(offsets))  # dense queues stay unique under the flood
    assert json.dumps(fuzzed)
