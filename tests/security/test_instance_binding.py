"""Issue 61, finding 11: a producer instance id is bound to the token that names it.

A check goes first to the instance that sent its half (contract 5.3): the half names its
sender (property `txcoord.producer_instance`), and a check poll naming the same id gets the
check at once, every other poller of the group only after `rest.check_sender_first`. Before,
the id was the caller's word: a second token of the same group that polled with the first
one's instance id took its checks first. Now, behind an auth file, an instance id stands for
(token, id) (coordinator/rest/instance_ids.py). Against Kafka and the app on a real port; the
coordinator's part (a check record made from the half as it was stored) is done here with
the engine's own codec.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordinator.core.config import Config, load_config
from coordinator.protocol import ingress as fmt
from coordinator.rest.app import create_app
from streams.kafka_io.check_topic import check_record
from tests.coordinator.rest.conftest import drop_topics, make_rest_config
from tests.coordinator.sdk.http_server import serving

pytestmark = pytest.mark.kafka

GROUP = "orders"
#: Two tokens of one producer group: two services, or two hosts of one.
TOKENS = {"a": "orders-host-a-token-of-this-test", "b": "orders-host-b-token-of-this-test"}
INSTANCE = "host-a"


@pytest.fixture
def config(bootstrap_servers: str, tmp_path: Path) -> Iterator[Config]:
    """Ingress topics of this test's own; a check waits a minute for its sender's poll, and
    two tokens of group `orders` may call."""
    auth = tmp_path / "tokens.toml"
    auth.touch(mode=0o600)
    auth.write_text(
        "".join(
            f'[[token]]\nname = "{name}"\ngroup = "{GROUP}"\n'
            f'sha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\n\n'
            for name, token in TOKENS.items()
        )
    )
    made = make_rest_config(bootstrap_servers, tmp_path, **{"rest.check_sender_first": "1m"})
    try:
        yield load_config(
            overrides={
                "warehouse": made.warehouse,
                "kafka.bootstrap_servers": bootstrap_servers,
                "kafka.half_topic": made.kafka.half_topic,
                "kafka.op_topic": made.kafka.op_topic,
                "kafka.check_topic": made.kafka.check_topic,
                "kafka.operator_topic": made.kafka.operator_topic,
                "kafka.partitions": "2",
                "rest.check_sender_first": "1m",
                "rest.auth_file": str(auth),
            }
        )
    finally:
        drop_topics(made)


def stored_half(config: Config, partition: int, offset: int) -> dict[str, Any]:
    """Return the half at `partition`/`offset` of the half topic as the coordinator's stage
    hands it to the check publisher (a CHECK row), its properties as stored."""
    consumer = KafkaConsumer(bootstrap_servers=config.kafka.bootstrap_servers)
    try:
        where = TopicPartition(config.kafka.half_topic, partition)
        consumer.assign([where])
        consumer.seek(where, offset)
        records = consumer.poll(timeout_ms=30_000, max_records=1).get(where, [])
    finally:
        consumer.close()
    assert records, "the half is not in Kafka"
    headers = dict(records[0].headers)
    properties = {
        name.removeprefix(fmt.PROPERTY_PREFIX): value.decode()
        for name, value in headers.items()
        if name.startswith(fmt.PROPERTY_PREFIX)
    }
    tx = records[0].key.decode()
    return {
        "transaction_id": tx, "msg_id": f"MSG-{tx}", "producer_group": GROUP,
        "topic": "OrderPaid", "queue_id": 0, "body": records[0].value, "keys": [],
        "tags": None, "properties": properties, "check_number": 1, "prepared_ms": 1_000,
        "at_ms": 7_000,
    }  # fmt: skip


def publish(config: Config, rows: list[dict[str, Any]]) -> None:
    """Publish check requests as the coordinator does, all on partition 0, in order."""
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, acks="all")
    try:
        for row in rows:
            key, value, headers = check_record(row)
            producer.send(config.kafka.check_topic, key=key, value=value, headers=headers,
                          partition=0)  # fmt: skip
        producer.flush(30)
    finally:
        producer.close()


def test_another_token_naming_the_same_instance_does_not_get_its_checks_first(
    config: Config,
) -> None:
    with (
        serving(create_app(config)) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):

        def as_token(name: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {TOKENS[name]}"}

        sent = http.post(
            "/v1/transactions",
            json={
                "producer_group": GROUP, "topic": "OrderPaid", "body": "pay 10",
                "transaction_id": "tx-of-a",
                "properties": {fmt.PRODUCER_INSTANCE_PROPERTY: INSTANCE},
            },
            headers=as_token("a"),
        )  # fmt: skip
        assert sent.status_code == 201, sent.text
        half = stored_half(config, sent.json()["partition"], sent.json()["offset"])
        # The coordinator checks the half, and then another transaction that named nobody:
        # a later record of the same partition, which any poller gets at once.
        marker = {**half, "transaction_id": "tx-marker", "properties": {}}
        publish(config, [half, marker])

        def poll(name: str, wait: float) -> list[str]:
            answer = http.get(
                "/v1/check-requests",
                params={"producer_group": GROUP, "producer_instance": INSTANCE,
                        "wait_seconds": wait},
                headers=as_token(name),
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
            return [check["transaction_id"] for check in answer.json()["check_requests"]]

        # Token b names a's instance. The marker's coming proves that the poll read past
        # a's check; before, both came: b took the check addressed to a's instance.
        taken = poll("b", wait=20)
        assert "tx-marker" in taken, taken
        assert taken == ["tx-marker"], (
            f"token b, naming instance {INSTANCE!r} of token a, took a's check first: {taken}"
        )
        # Token a, naming its own instance, gets it at once (not after the minute).
        assert poll("a", wait=0) == ["tx-of-a"]
