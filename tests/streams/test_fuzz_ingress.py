"""A fuzzed flood of raw Kafka records while a normal workload runs (contract 7.9).

Hypothesis generates raw records (random and extreme headers, keys and values: invalid UTF-8,
huge numbers, empty and oversize fields, headers without a value, repeated headers, names
with trailing newlines, and records one field away from valid) and sends them straight to
the ingress topics while a workload of another producer group runs through the real
coordinator query. Afterwards:
the stream is still up, every fuzzed record is accounted for by its (topic, partition,
offset) in `system/quarantine` or in the table it belongs to, and the workload ended exactly
as it does without the flood. Fuzzed records never carry `txcoord.kind: TICK` exactly: valid
heartbeats are collapsed to one per batch by design, so they would not be countable.
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
from tests.harness import TOPIC, Engine, Producer, Responder, table, wait_for
from tests.streams.conftest import ConfigFactory
from tests.streams.ingress_records import MAX_MESSAGE, raw_record

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long(0.6)]

#: The workload's group: the fuzz never uses it, so nothing fuzzed may touch its transactions.
GROUP = "workload"
COMMITS, ROLLBACKS, CHECKED = ["c0", "c1", "c2"], ["r0", "r1"], ["k0"]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="10s",
        transaction_check_max="4",
        max_message_size=str(MAX_MESSAGE),
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


def positions(spark: SparkSession, config: Config) -> set[tuple[str, int, int]]:
    """Return the (topic, partition, offset) of every record in quarantine or a table."""
    found = {
        (r.source_topic, r.source_partition, r.source_offset)
        for r in table(spark, config, "system/quarantine").collect()
    }
    for topic, name in (
        (config.kafka.half_topic, "system/half_messages"),
        (config.kafka.op_topic, "system/op_records"),
    ):
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
    # librdkafka: it sends a header without a value (kafka-python refuses one).
    fuzzer = ConfluentProducer(
        {
            "bootstrap.servers": config.kafka.bootstrap_servers,
            "acks": "all",
            "message.max.bytes": 4 << 20,
            # One record per batch, as each was sent before: the topic's max.message.bytes
            # bounds a batch, and a batch of several large records would be refused whole.
            "batch.num.messages": 1,
        }
    )
    topics = {"half": config.kafka.half_topic, "op": config.kafka.op_topic}
    fuzzed: list[tuple[str, int, int]] = []

    @settings(
        max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(records=st.lists(raw_record(), min_size=1, max_size=12))
    def flood(records: list[dict[str, Any]]) -> None:
        failed: list[Any] = []

        def stored(error: Any, message: Any) -> None:
            if error is not None:
                failed.append(error)
            else:
                fuzzed.append((message.topic(), message.partition(), message.offset()))

        for r in records:
            fuzzer.produce(
                topics[r["topic"]], key=r["key"], value=r["value"], headers=r["headers"],
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
