"""A fuzzed flood of raw Kafka records while a normal workload runs (contract 7.9).

Hypothesis generates raw records (random and extreme headers, keys and values: invalid UTF-8,
huge numbers, empty and oversize fields, headers without a value, repeated headers, names
with trailing newlines, and records one field away from valid) and sends them straight to
the ingress topics while a workload of another producer group runs through the real
decision query. Afterwards:
the stream is still up, every fuzzed record is accounted for by its (topic, partition,
offset) in `system/quarantine` or in the table it belongs to, and the workload ended exactly
as it does without the flood. Fuzzed records never carry `txcoord.kind: TICK` exactly: valid
heartbeats are collapsed to one per batch by design, so they would not be countable.

Both topic layouts: in the per-group one the flood also reaches a group's own half and op
topics and an operator's topic (coordinator/core/topics.py). max_message_size is above
1 MiB, so bodies past Kafka's default record size (1 MiB + 1, the limit, one byte over) are
in the flood too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Producer as ConfluentProducer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from streams.kafka_io.ingress_topics import ensure_group_topics, ensure_operator_topic
from tests.harness import TOPIC, Engine, Producer, Responder, as_group, table, wait_for
from tests.streams.conftest import ConfigFactory
from tests.streams.ingress_records import raw_record

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: The workload's group: the fuzz never uses it, so nothing fuzzed may touch its transactions.
GROUP = "workload"
COMMITS, ROLLBACKS, CHECKED = ["c0", "c1", "c2"], ["r0", "r1"], ["k0"]
#: Above 1 MiB (tests/streams/ingress_records.py's large bodies).
MAX_MESSAGE = 1536 * 1024
#: In the per-group layout: a group and an operator whose own topics the flood reaches too.
FUZZ_GROUP, FUZZ_OPERATOR = "fz", "fz-op"


@pytest.fixture(params=[False, True], ids=["shared", "per-group"])
def config(make_config: ConfigFactory, request: pytest.FixtureRequest) -> Config:
    config = make_config(
        transaction_timeout="3s",
        transaction_check_interval="10s",
        transaction_check_max="4",
        max_message_size=str(MAX_MESSAGE),
        **{
            "streams.trigger_interval": "1s",
            "streams.tick_interval": "1s",
            "kafka.topics_per_group": str(request.param).lower(),
        },
    )
    if request.param:  # before the engine starts: its pattern finds them at once
        ensure_group_topics(config, GROUP)
        ensure_group_topics(config, FUZZ_GROUP)
        ensure_operator_topic(config, FUZZ_OPERATOR)
    return config


def targets(config: Config) -> dict[str, list[str]]:
    """Return the topics the flood writes to, by the kind of record they carry."""
    layout = config.kafka.layout
    if not layout.per_group:
        return {"half": [layout.half], "op": [layout.op]}
    return {
        "half": [layout.half, layout.half_topic(FUZZ_GROUP)],
        "op": [layout.op, layout.op_topic(FUZZ_GROUP), layout.operator_topic(FUZZ_OPERATOR)],
    }


def workload_responder(config: Config, producer: Producer) -> Responder:
    """Answer the workload's checked transaction with COMMIT, in the workload's group."""

    def answer(request: dict[str, Any]) -> None:
        # Answered here, in the workload's group (the harness's responder answers as "orders").
        if request["producer_group"] == GROUP and request["transaction_id"] in CHECKED:
            producer.op(request["transaction_id"], "COMMIT", group=GROUP, from_check=True)
            producer.flush()

    # In the per-group layout the workload's checks come on its own check topic.
    return Responder(as_group(config, GROUP), answer, group=GROUP)


def fuzz_producer(config: Config) -> ConfluentProducer:
    """librdkafka's producer: it sends a header without a value (kafka-python refuses one)."""
    return ConfluentProducer(
        {
            "bootstrap.servers": config.kafka.bootstrap_servers,
            "acks": "all",
            "message.max.bytes": 4 << 20,  # above MAX_MESSAGE and the header allowance
            # One record per batch, as each was sent before: the topic's max.message.bytes
            # bounds a batch, and a batch of several large records would be refused whole.
            "batch.num.messages": 1,
        }
    )


def positions(spark: SparkSession, config: Config) -> set[tuple[str, int, int]]:
    """Return the (topic, partition, offset) of every record in quarantine or a table.

    The ingest's tables keep a record's partition and offset, not its topic: a row counts
    for each topic of its kind it may have come from.
    """
    found = {
        (r.source_topic, r.source_partition, r.source_offset)
        for r in table(spark, config, "system/quarantine").collect()
    }
    for kind, name in (("half", "system/half_messages"), ("op", "system/op_records")):
        rows = table(spark, config, name).where("kind != 'TICK'").collect()
        found |= {
            (topic, r.ingress_partition, r.ingress_offset)
            for r in rows
            for topic in targets(config)[kind]
        }
    return found


def test_a_fuzzed_flood_stops_nothing_and_changes_nothing(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    producer = Producer(as_group(config, GROUP))
    responder = workload_responder(config, producer)
    fuzzer = fuzz_producer(config)
    topics = targets(config)
    fuzzed: list[tuple[str, int, int]] = []
    sizes: list[int] = []  # of the bodies sent

    @settings(
        max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(
        records=st.lists(
            st.tuples(raw_record(large_bodies=MAX_MESSAGE), st.integers(0, 2)),
            min_size=1,
            max_size=12,
        )
    )
    def flood(records: list[tuple[dict[str, Any], int]]) -> None:
        failed: list[Any] = []

        def stored(error: Any, message: Any) -> None:
            if error is not None:
                failed.append(error)
            else:
                fuzzed.append((message.topic(), message.partition(), message.offset()))

        for r, target in records:
            sizes.append(len(r["value"] or b""))
            kind = topics[r["topic"]]
            fuzzer.produce(
                kind[target % len(kind)], key=r["key"], value=r["value"], headers=r["headers"],
                on_delivery=stored,
            )  # fmt: skip
        assert fuzzer.flush(60) == 0, "records still unsent after 60 s"
        assert failed == []

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
        fuzzer.flush(10)
        producer.close()
        responder.stop()

    assert engine.coordinator is not None and engine.coordinator.isActive, engine.coordinator
    assert len(fuzzed) > 50  # the flood was a flood
    assert max(sizes) > 1 << 20  # with bodies above 1 MiB
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
    offsets = sorted(
        (r.queue_id, r.queue_offset) for r in table(spark, config, f"topics/{TOPIC}").collect()
    )
    assert len(offsets) == len(set(offsets))  # dense queues stay unique under the flood
    assert json.dumps(fuzzed)
