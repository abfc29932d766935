"""Issue 61, finding 7: the topics halves bring in are bounded (auto_create_topic_enable on).

Every new topic a half names becomes a table that every start fences, a metric label and a
tally entry. Before, with auto-create on (the default), a producer could name new topics
without end. Now the warehouse holds at most `max_topics` (1,000) topics and one producer
group brings in at most `max_topics_per_group` (100): the REST ingress refuses a send past
either with `403 topic_limit` and writes nothing to Kafka; the coordinator quarantines a half
that comes past them on the Kafka path, and goes on. Against Kafka and the app on a real port
with the default limits; then against the engine, with small ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kafka import KafkaConsumer, TopicPartition

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from tests.conftest import ConfigFactory
from tests.coordinator.rest.conftest import drop_topics, make_rest_config
from tests.coordinator.sdk.http_server import serving
from tests.harness import Engine, Producer, table, wait_for

pytestmark = pytest.mark.kafka

#: The defaults: max_topics, max_topics_per_group.
MAX_TOPICS, MAX_PER_GROUP = 1000, 100


@pytest.fixture
def config(bootstrap_servers: str, tmp_path: Path) -> Iterator[Config]:
    """Ingress topics and a warehouse of this test's own; the default limits."""
    made = make_rest_config(bootstrap_servers, tmp_path)
    try:
        yield made
    finally:
        drop_topics(made)


def half_topic_end(config: Config) -> int:
    """Return how many records the half topic holds."""
    consumer = KafkaConsumer(bootstrap_servers=config.kafka.bootstrap_servers)
    try:
        parts = [
            TopicPartition(config.kafka.half_topic, p)
            for p in consumer.partitions_for_topic(config.kafka.half_topic) or ()
        ]
        return sum(consumer.end_offsets(parts).values())
    finally:
        consumer.close()


def batch(group: str, topics: list[str]) -> dict[str, Any]:
    return {
        "messages": [{"producer_group": group, "topic": topic, "body": "b"} for topic in topics]
    }


def test_the_rest_ingress_refuses_new_topics_past_the_limits(config: Config) -> None:
    with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=60) as http:
        # One producer group brings in its 100 topics...
        first = [f"Orders{n:03d}" for n in range(MAX_PER_GROUP)]
        sent = http.post("/v1/transactions/batch", json=batch("orders", first))
        assert sent.status_code == 201, sent.text[:500]
        # ... and no 101st: before, any number of them.
        written = half_topic_end(config)
        more = http.post(
            "/v1/transactions", json={"producer_group": "orders", "topic": "Orders100", "body": "b"}
        )
        assert more.status_code == 403, (
            f"a new topic past max_topics_per_group ({MAX_PER_GROUP}) was accepted: "
            f"{more.status_code} {more.text[:300]}"
        )
        error = more.json()
        assert error["error"] == "topic_limit", error
        assert "max_topics_per_group (100)" in error["message"] and "orders" in error["message"]
        assert half_topic_end(config) == written, "the refused half reached Kafka"
        # Its known topics still take sends, and so does another group's new topic.
        again = http.post(
            "/v1/transactions", json={"producer_group": "orders", "topic": "Orders007", "body": "b"}
        )
        assert again.status_code == 201, again.text

        # Nine more groups fill the warehouse to its 1,000 topics; the next new one is refused
        # from any group, naming the item of the batch.
        for g in range(1, MAX_TOPICS // MAX_PER_GROUP):
            topics = [f"G{g}T{n:03d}" for n in range(MAX_PER_GROUP)]
            filled = http.post("/v1/transactions/batch", json=batch(f"group-{g}", topics))
            assert filled.status_code == 201, filled.text[:500]
        written = half_topic_end(config)
        past = http.post("/v1/transactions/batch", json=batch("newcomer", ["Orders001", "Fresh"]))
        assert past.status_code == 403, (
            f"a new topic past max_topics ({MAX_TOPICS}) was accepted: {past.text[:300]}"
        )
        assert past.json()["error"] == "topic_limit"
        assert past.json()["message"].startswith("messages[1].topic: 'Fresh'"), past.json()
        assert "max_topics (1000)" in past.json()["message"]
        assert half_topic_end(config) == written, "a refused batch reached Kafka"
        known = http.post("/v1/transactions/batch", json=batch("newcomer", ["Orders001"]))
        assert known.status_code == 201, known.text


@pytest.mark.spark
def test_the_engine_quarantines_halves_past_the_limits_and_goes_on(
    make_config: ConfigFactory, spark: Any
) -> None:
    """The Kafka path: a producer writing the half topic itself. One partition, so the order
    the engine sees is the order sent."""
    config = make_config(
        **{"max_topics": "3", "max_topics_per_group": "2", "kafka.partitions": "1"}
    )
    engine = Engine(spark, config)
    try:

        def send(sends: list[tuple[str, str, str]]) -> None:
            producer = Producer(config)
            try:
                for tx, group, topic in sends:
                    producer.half(tx, group=group, topic=topic)
                producer.flush()
                for tx, group, _ in sends:
                    producer.op(tx, "COMMIT", group=group)
                producer.flush()
            finally:
                producer.close()

        def delivered() -> set[str]:
            found = set()
            for topic in "ABCDE":
                try:
                    rows = table(spark, config, f"topics/{topic}").collect()
                except Exception:  # no table: nothing delivered
                    continue
                found |= {row.transaction_id for row in rows}
            return found

        def quarantined() -> dict[str, str]:
            try:
                rows = table(spark, config, "system/quarantine").collect()
            except Exception:  # not there yet
                return {}
            return {bytes(row.key).decode(): row.reason for row in rows if row.key}

        # Group g1 brings in two topics, its limit.
        send([("tx-a", "g1", "A"), ("tx-b", "g1", "B")])
        wait_for(lambda: delivered() == {"tx-a", "tx-b"}, 240, "two deliveries")
        # Later batches know them: a third of g1 is refused; g2 brings in the warehouse's
        # third topic, and then no fourth.
        send([("tx-c", "g1", "C"), ("tx-d", "g2", "D"), ("tx-e", "g2", "E"), ("tx-a2", "g1", "A")])
        wait_for(lambda: len(quarantined()) >= 2, 240, "two halves quarantined")
        reasons = quarantined()
        assert set(reasons) == {"tx-c", "tx-e"}, reasons
        assert "max_topics_per_group (2)" in reasons["tx-c"], reasons
        assert "max_topics (3)" in reasons["tx-e"], reasons
        # The stream went on: a known topic's half of the same batch is delivered.
        wait_for(lambda: "tx-a2" in delivered(), 240, "the delivery after the refusals")
        assert delivered() == {"tx-a", "tx-b", "tx-d", "tx-a2"}
        known = {
            row.topic: row.producer_group
            for row in table(spark, config, "system/known_topics").collect()
        }
        assert known == {"A": "g1", "B": "g1", "D": "g2"}, json.dumps(known)
        assert engine.coordinator is not None and engine.coordinator.isActive
    finally:
        engine.stop()
