"""The REST ingress in the per-group topic layout (coordinator/core/topics.py), on the real
broker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from kafka import KafkaProducer

from coordinator.core.config import Config
from coordinator.kafka_clients.admin import delete_topic
from coordinator.protocol import ingress as fmt
from coordinator.rest.app import create_app
from streams.kafka_io.check_topic import ensure_check_topic
from streams.query.batch_writer import check_record

from .conftest import LOCAL, drop_topics, make_rest_config
from .kafka_io import read_all
from .test_auth import HALF

pytestmark = pytest.mark.kafka


@pytest.fixture
def per_group(bootstrap_servers: str, tmp_path: Path) -> Iterator[Config]:
    """Return a configuration of this test's own topics, laid out per group."""
    config = make_rest_config(bootstrap_servers, tmp_path, **{"kafka.topics_per_group": "true"})
    try:
        yield config
    finally:
        drop_topics(config)
        layout = config.kafka.layout
        for group in ("orders", "billing"):
            for topic in (
                layout.half_topic(group),
                layout.op_topic(group),
                layout.check_topic(group),
            ):
                delete_topic(config.kafka.bootstrap_servers, topic)
        delete_topic(config.kafka.bootstrap_servers, layout.operator_topic("ANONYMOUS"))


def test_each_group_writes_and_reads_its_own_topics(per_group: Config) -> None:
    layout, bootstrap = per_group.kafka.layout, per_group.kafka.bootstrap_servers
    app = create_app(per_group)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        for group in ("orders", "billing"):
            answer = client.post("/v1/transactions", json={**HALF, "producer_group": group})
            assert answer.status_code == 201, answer.text
        answer = client.post("/v1/transactions/t-1/commit", json={"producer_group": "orders"})
        assert answer.status_code == 202, answer.text
        # The REST created each group's topics before its first record.
        for group in ("orders", "billing"):
            (half,) = read_all(bootstrap, layout.half_topic(group))
            assert dict(half.headers)[fmt.PRODUCER_GROUP] == group.encode()
        (op,) = read_all(bootstrap, layout.op_topic("orders"))
        assert op.key == b"t-1"
        # An operator's op (open mode: every caller is admin) goes to the operator topic of
        # the ingress's own principal, ANONYMOUS without SASL, created on first use.
        by_operator = {"producer_group": "orders", "operator": "alice", "reason": "paid"}
        answer = client.post("/v1/transactions/t-3/rollback", json=by_operator)
        assert answer.status_code == 202, answer.text
        (op,) = read_all(bootstrap, layout.operator_topic("ANONYMOUS"))
        assert (op.key, dict(op.headers)[fmt.OPERATOR]) == (b"t-3", b"alice")
        assert read_all(bootstrap, layout.half) == [] and read_all(bootstrap, layout.op) == []
        # A check of the group's own check topic reaches the group's pollers.
        check = check_record(
            {
                "transaction_id": "t-2",
                "msg_id": "0000000000000000002A",
                "producer_group": "orders",
                "topic": "OrderPaid",
                "queue_id": 1,
                "body": b"x",
                "keys": [],
                "tags": None,
                "properties": {},
                "check_number": 1,
                "prepared_ms": 1_700_000_000_000,
                "at_ms": 1_700_000_006_000,
            }
        )
        publish_check(per_group, layout.check_topic("orders"), check)
        # Polled until it comes (a poll hands out what came within its wait: the group's
        # first poll also joins the consumer group, seconds on a loaded machine).
        found: list[str] = []
        deadline = time.monotonic() + 90
        while not found and time.monotonic() < deadline:
            answer = client.get("/v1/check-requests?producer_group=orders&wait_seconds=10")
            assert answer.status_code == 200, answer.text
            found = [c["transaction_id"] for c in answer.json()["check_requests"]]
        assert found == ["t-2"]


def test_a_group_no_topic_name_can_hold_is_refused(per_group: Config) -> None:
    app = create_app(per_group)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        # A name the group rule takes ('%' and '|' no longer are) but too long for its topics.
        answer = client.post("/v1/transactions", json={**HALF, "producer_group": "g" * 240})
    assert answer.status_code == 422, answer.text
    assert "too long for Kafka topics of its own" in answer.json()["message"]


@pytest.mark.parametrize("group", ["g" * 240, "G" * 255])
def test_a_group_no_topic_name_can_hold_is_refused_when_it_polls(
    per_group: Config, group: str
) -> None:
    """Before: 500 (the group's check topic would have a name Kafka refuses)."""
    app = create_app(per_group)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
        answer = client.get(
            "/v1/check-requests", params={"producer_group": group, "wait_seconds": 0}
        )
    assert answer.status_code == 422, answer.text
    assert "too long for Kafka topics of its own" in answer.json()["message"]


def publish_check(
    config: Config, topic: str, record: tuple[bytes, bytes, list[tuple[str, bytes]]]
) -> None:
    """Write one check record as the coordinator would (the topic is created first)."""
    ensure_check_topic(config, topic)
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, acks="all")
    try:
        key, value, headers = record
        producer.send(topic, key=key, value=value, headers=headers).get(timeout=30)
    finally:
        producer.close()
