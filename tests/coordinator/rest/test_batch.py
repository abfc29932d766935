"""contract 5.1: a batch call answers item by item, so a client knows exactly what is durable.

The partial failure is a real one: the half topic is created with a small
`max.message.bytes`, so the broker itself refuses one item's record batch as too large
while the items on the other partition are written (records are partitioned by key).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kafka.partitioner.default import murmur2

from coordinator.core.config import Config, load_config
from coordinator.kafka_clients.admin import ensure_topic
from coordinator.protocol import ingress as fmt
from coordinator.rest.app import create_app
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from tests.coordinator.rest.conftest import LOCAL, drop_topics
from tests.coordinator.rest.kafka_io import read_all

pytestmark = pytest.mark.kafka

#: What the broker accepts in the half topic of this module: a body of 4 KiB is refused.
TOPIC_LIMIT = 2048


def partition_of(key: str, partitions: int = 2) -> int:
    """Return the partition Kafka's default partitioner (murmur2) picks for `key`."""
    return int((murmur2(key.encode()) & 0x7FFFFFFF) % partitions)


def ids_on(partition: int, count: int) -> list[str]:
    """Return `count` fresh transaction ids whose records land on `partition`."""
    found: list[str] = []
    while len(found) < count:
        candidate = f"tx-{uuid.uuid4().hex[:12]}"
        if partition_of(candidate) == partition:
            found.append(candidate)
    return found


@pytest.fixture
def small_topic_config(bootstrap_servers: str, tmp_path: Path) -> Iterator[Config]:
    """A configuration whose half topic refuses records larger than TOPIC_LIMIT bytes."""
    suffix = uuid.uuid4().hex[:8]
    config = load_config(
        overrides={
            "warehouse": str(tmp_path / "warehouse"),
            "kafka.bootstrap_servers": bootstrap_servers,
            "kafka.half_topic": f"half-{suffix}",
            "kafka.op_topic": f"op-{suffix}",
            "kafka.check_topic": f"check-{suffix}",
            "kafka.partitions": "2",
        }
    )
    ensure_topic(
        bootstrap_servers,
        config.kafka.half_topic,
        2,
        {"message.timestamp.type": "LogAppendTime", "max.message.bytes": str(TOPIC_LIMIT)},
    )
    ensure_ingress_topics(config)
    try:
        yield config
    finally:
        drop_topics(config)


def half(tx: str, body: str = "small") -> dict[str, Any]:
    return {"producer_group": "orders", "topic": "OrderPaid", "transaction_id": tx, "body": body}


def test_a_partly_failed_batch_names_each_durable_item(small_topic_config: Config) -> None:
    config = small_topic_config
    first, second = ids_on(0, 2)
    (big,) = ids_on(1, 1)
    # The case: earlier items durable, a later one refused. (An item after the refused
    # one may be aborted with it, where the producer treats the refusal as fatal.)
    messages = [half(first), half(second), half(big, "y" * 4 * TOPIC_LIMIT)]
    app = create_app(config)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        answer = client.post("/v1/transactions/batch", json={"messages": messages})
        assert answer.status_code == 207, answer.text
        results = answer.json()["results"]
        assert [r["transaction_id"] for r in results] == [first, second, big]
        assert [r["status"] for r in results] == [201, 201, 413]
        assert results[2]["error"]["error"] == "too_large"
        assert results[2]["result"] is None
        stored = {
            r.key.decode(): r
            for r in read_all(config.kafka.bootstrap_servers, config.kafka.half_topic)
        }
        # Exactly the items answered 201 are in Kafka, where the answer says.
        assert set(stored) == {first, second}
        for item in results[:2]:
            record = stored[item["transaction_id"]]
            assert item["error"] is None
            assert item["result"]["msg_id"] == fmt.msg_id_of(record.partition, record.offset)
        # The ingress keeps writing afterwards: a retry of the refused item alone, made small.
        retry = client.post("/v1/transactions/batch", json={"messages": [half(big)]})
        assert retry.status_code == 201, retry.text
        assert [r["status"] for r in retry.json()["results"]] == [201]


def test_a_whole_batch_durable_is_201_with_a_status_per_item(
    client: TestClient, rest_config: Config
) -> None:
    messages = [half(f"w-{i}") for i in range(5)]
    answer = client.post("/v1/transactions/batch", json={"messages": messages})
    assert answer.status_code == 201, answer.text
    results = answer.json()["results"]
    assert [r["status"] for r in results] == [201] * 5
    assert all(r["error"] is None and r["result"]["status"] == "PREPARED" for r in results)
    ops = [
        {"transaction_id": f"w-{i}", "op": "COMMIT", "producer_group": "orders"} for i in range(5)
    ]
    answer = client.post("/v1/ops/batch", json={"ops": ops})
    assert answer.status_code == 202, answer.text
    assert [r["status"] for r in answer.json()["results"]] == [202] * 5
    assert [r["result"]["op"] for r in answer.json()["results"]] == ["COMMIT"] * 5


def test_a_batch_nothing_of_which_is_durable_is_a_plain_503(
    rest_config: Config, free_port: int
) -> None:
    down = load_config(
        overrides={
            "kafka.bootstrap_servers": f"127.0.0.1:{free_port}",
            "warehouse": rest_config.warehouse,
        }
    )
    app = create_app(down)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        answer = client.post("/v1/transactions/batch", json={"messages": [half("a"), half("b")]})
        assert answer.status_code == 503
        assert answer.json()["error"] == "kafka_unavailable"
        assert answer.headers["retry-after"] == "1"


def test_a_record_the_broker_refuses_does_not_poison_later_requests(
    small_topic_config: Config,
) -> None:
    """An idempotent producer may treat a refusal as fatal and abort every later batch with
    it (kafka-python did): the ingress must answer 413 once and then go on writing."""
    with TestClient(
        create_app(small_topic_config), base_url=LOCAL, raise_server_exceptions=False
    ) as client:
        refused = client.post("/v1/transactions", json=half("big", "y" * 4 * TOPIC_LIMIT))
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"] == "too_large"
        for i in range(3):
            answer = client.post("/v1/transactions", json=half(f"after-{i}"))
            assert answer.status_code == 201, answer.text
