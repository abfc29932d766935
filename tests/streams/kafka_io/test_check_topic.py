"""Check records of every size the ingress accepts reach the producers (real broker, no Spark).

A check carries the half's body as base64 in JSON: a 4 MiB body makes a ~5.6 MiB record,
above Kafka's 1 MiB defaults. The check topic and the coordinator's producer are sized from
max_message_size; an older, smaller check topic is raised at start; consumers with
kafka-python's default fetch sizes still receive the record (KIP-74); and a record Kafka
refuses anyway is published slim instead of failing the coordinator's batch for ever.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.admin import ConfigResource, ConfigResourceType

from coordinator.core.config import Config
from coordinator.kafka_clients.admin import admin_client, delete_topic, ensure_topic
from coordinator.kafka_clients.options import COMMITTED_ONLY
from coordinator.sdk.kafka_transport import KafkaTransport
from coordinator.sdk.message import CheckRequest
from streams.kafka_io.check_publisher import CheckPublisher
from streams.kafka_io.check_topic import (
    check_record,
    check_record_limit,
    check_topic_max_bytes,
    publishable_record,
    record_bytes,
)
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from tests.streams.conftest import ConfigFactory

MIB = 1024 * 1024
#: Kafka's default max.message.bytes of a topic (1 MiB + record batch overhead).
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588


def check_row(tx: str, body: bytes, group: str = "orders", **fields: Any) -> dict[str, Any]:
    """Return a CHECK row of the stateful stage, as the writer reads it."""
    return {
        "transaction_id": tx, "msg_id": f"m-{tx}", "producer_group": group, "topic": "OrderPaid",
        "queue_id": 1, "body": body, "keys": [tx], "tags": "t", "properties": {"a": "b"},
        "check_number": 1, "prepared_ms": 1_800_000_000_000, "at_ms": 1_800_000_010_000,
        **fields,
    }  # fmt: skip


def max_message_bytes(config: Config) -> int:
    topic = config.kafka.check_topic
    with admin_client(config.kafka.bootstrap_servers) as admin:
        described: Any = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, {"max.message.bytes": None})],
            config_filter="all",
        )
    return int(described["topic"][topic]["max.message.bytes"]["value"])


def wait_until_limit_is(config: Config, limit: int) -> None:
    """Wait until the broker reports the check topic's max.message.bytes as `limit`: it applies
    a topic's new config shortly after the call that changed it has returned."""
    deadline = time.monotonic() + 60
    while (current := max_message_bytes(config)) != limit:
        assert time.monotonic() < deadline, f"max.message.bytes is {current}, not {limit}"
        time.sleep(0.2)


def consume_all(config: Config, expected: int) -> list[Any]:
    """Read `expected` records of the check topic with kafka-python's default fetch sizes,
    committed only (what an aborted transaction sent is never a check)."""
    consumer = KafkaConsumer(
        config.kafka.check_topic,
        bootstrap_servers=config.kafka.bootstrap_servers,
        group_id=f"reader-{os.getpid()}-{time.monotonic_ns()}",
        auto_offset_reset="earliest",
        **COMMITTED_ONLY,
    )
    try:
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got += records
        return got
    finally:
        consumer.close()


@pytest.fixture
def config(make_config: ConfigFactory) -> Iterator[Config]:
    made = make_config()
    try:
        yield made
    finally:
        servers = made.kafka.bootstrap_servers
        for topic in (made.kafka.half_topic, made.kafka.op_topic, made.kafka.check_topic):
            delete_topic(servers, topic)


def test_the_limit_fits_a_base64_body_of_max_message_size() -> None:
    for size in (1, 4 * MIB, 64 * MIB):
        body = b"\xff" * size
        record = check_record(check_row("tx", body))
        assert record_bytes(record) <= check_record_limit(size) < check_topic_max_bytes(size)
    # Broker's socket.request.max.bytes (100 MiB) still takes the largest.
    assert check_topic_max_bytes(64 * MIB) < 100 * MIB


def test_a_record_with_oversized_fields_is_published_slim() -> None:
    """Fields far beyond the allowance (here escaped control characters) never fail a batch."""
    row = check_row("tx", b"body", properties={"p": "\x01" * 200_000})
    limit = check_record_limit(1024)
    record = publishable_record(row, limit)
    assert record_bytes(record) <= limit
    value = json.loads(record[1])
    assert value["omitted"] == ["body", "keys", "tags", "properties"]
    assert "more than the check topic's" in value["omitted_reason"]
    assert value["body_size"] == 4 and value["message_in"] == "system/check_requests"
    request = CheckRequest.from_json(record[1])  # still a check the SDK answers
    assert (request.transaction_id, request.check_number, request.body) == ("tx", 1, b"")
    assert request.omitted == ("body", "keys", "tags", "properties")  # the listener can tell
    whole = CheckRequest.from_json(publishable_record(check_row("tx", b"body"), limit)[1])
    assert (whole.body, whole.omitted) == (b"body", ())


@pytest.mark.kafka
def test_an_existing_smaller_check_topic_is_raised_at_start(config: Config) -> None:
    ensure_topic(
        config.kafka.bootstrap_servers,
        config.kafka.check_topic,
        2,
        {"max.message.bytes": str(KAFKA_DEFAULT_MAX_MESSAGE_BYTES)},
    )
    ensure_ingress_topics(config)
    wait_until_limit_is(config, check_topic_max_bytes(config.max_message_size))


@pytest.mark.kafka
def test_a_check_with_a_body_of_max_message_size_reaches_default_consumers(
    config: Config,
) -> None:
    ensure_ingress_topics(config)
    body = os.urandom(config.max_message_size - 1024)
    row = check_row("big", body)
    publisher = CheckPublisher(config)
    try:
        publisher.publish(
            [(row, publishable_record(row, check_record_limit(config.max_message_size)))]
        )
    finally:
        publisher.close()
    (record,) = consume_all(config, 1)
    assert len(record.value) > 5 * MIB
    assert base64.b64decode(json.loads(record.value)["body_base64"]) == body
    # The SDK's transport (its own consumer settings) gets it whole too.
    transport = KafkaTransport(
        config.kafka.bootstrap_servers,
        "orders",
        half_topic=config.kafka.half_topic,
        op_topic=config.kafka.op_topic,
        check_topic=config.kafka.check_topic,
    )
    try:
        requests: list[CheckRequest] = []
        deadline = time.monotonic() + 60
        while not requests and time.monotonic() < deadline:
            requests = transport.poll_checks(10, 1.0)
        assert [(r.transaction_id, r.body) for r in requests] == [("big", body)]
    finally:
        transport.close()


@pytest.mark.kafka
def test_a_check_kafka_refuses_as_too_large_goes_out_slim(config: Config) -> None:
    """A topic the coordinator could not size (here: made small behind its back)."""
    ensure_ingress_topics(config)
    with admin_client(config.kafka.bootstrap_servers) as admin:
        small = {"max.message.bytes": str(64 * 1024)}
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, config.kafka.check_topic, small)]
        )
    wait_until_limit_is(config, 64 * 1024)  # else the big one could go out before, whole
    # Small checks in the same call, before and after: a refused batch aborts what is in
    # flight with it in an idempotent producer; they must still arrive, once published.
    rows = [check_row(f"fits-{i}", b"small") for i in range(3)]
    rows.insert(1, check_row("big", os.urandom(MIB)))
    publisher = CheckPublisher(config)
    try:
        publisher.publish([(row, check_record(row)) for row in rows])  # no exception
    finally:
        publisher.close()
    values = {v["transaction_id"]: v for v in (json.loads(r.value) for r in consume_all(config, 4))}
    assert sorted(values) == ["big", "fits-0", "fits-1", "fits-2"]
    assert values["big"]["omitted"] == ["body", "keys", "tags", "properties"]
    assert values["big"]["body_size"] == MIB
    assert "refused" in values["big"]["omitted_reason"]
    for name in ("fits-0", "fits-1", "fits-2"):
        assert base64.b64decode(values[name]["body_base64"]) == b"small"
        assert "omitted" not in values[name]
