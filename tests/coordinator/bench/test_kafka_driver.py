"""The bench's Kafka driver writes the SDK's records and times every acknowledgement.

Its producer is librdkafka's, not the SDK's: read back from the real broker, every record
must be the one the SDK's coordinator/protocol/records.py builds for that transaction.
"""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer

from coordinator.bench.kafka_driver import KafkaDriver, now_ms
from coordinator.bench.workload import CHECKED_COMMIT, COMMIT, ROLLBACK
from coordinator.protocol import ingress as fmt
from coordinator.protocol.records import op_headers
from coordinator.sdk import Message

pytestmark = pytest.mark.kafka

GROUP, TOPIC = "bench-group", "BenchTopic"


def read_all(bootstrap_servers: str, topic: str, count: int) -> list[tuple[bytes, bytes, list]]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15_000,
    )
    try:
        records = []
        for record in consumer:
            records.append((record.key, record.value, list(record.headers)))
            if len(records) == count:
                break
        return records
    finally:
        consumer.close()


def test_the_records_are_the_sdks_and_every_ack_is_timed(
    bootstrap_servers: str, kafka_topic: str
) -> None:
    batch = [("tx-1", COMMIT), ("tx-2", ROLLBACK), ("tx-3", CHECKED_COMMIT)]
    ids = [tx for tx, _ in batch]
    began = now_ms()
    driver = KafkaDriver(
        bootstrap_servers, GROUP, TOPIC, half_topic=kafka_topic, op_topic=kafka_topic, body_size=10
    )
    try:
        driver.send(batch)
        assert sorted(driver.half_acks) == ids, "send() returns once every half is stored"
        driver.finish()
        assert sorted(driver.op_acks) == ids
    finally:
        driver.close()
    assert all(
        began <= at <= now_ms() for at in [*driver.half_acks.values(), *driver.op_acks.values()]
    )
    assert driver.errors == []

    records = read_all(bootstrap_servers, kafka_topic, 2 * len(batch))
    halves, ops = {}, {}
    for key, value, headers in records:  # an op has an op header, a half none
        (ops if fmt.OP in dict(headers) else halves)[key.decode()] = (value, headers)
    assert sorted(halves) == sorted(ops) == ids
    for tx, kind in batch:
        value, headers = halves[tx]
        born = int(dict(headers)[fmt.BORN_AT])
        message = Message(topic=TOPIC, keys=[tx], properties={"bench.kind": kind.name})
        assert (value, headers) == (b"x" * 10, message.half_headers(GROUP, born))
        value, headers = ops[tx]
        born = int(dict(headers)[fmt.BORN_AT])
        assert (value, headers) == (b"", op_headers(GROUP, kind.first_op, False, born))


def test_an_unreachable_broker_fails_the_batch_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("coordinator.bench.kafka_driver.ACK_TIMEOUT", 3.0)
    driver = KafkaDriver("127.0.0.1:1", GROUP, TOPIC, half_topic="h", op_topic="o")
    try:
        with pytest.raises(RuntimeError, match="not acknowledged within 3 s"):
            driver.send([("tx-1", COMMIT)])
    finally:
        driver.close()
