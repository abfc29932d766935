"""A half with a body just under max_message_size is checked, answered and delivered once.

The check record carries the body as base64 in JSON (~5.6 MiB for a 4 MiB body): more than
Kafka's 1 MiB defaults for a topic and for kafka-python's producer. End to end on the real
stack: Kafka ingress -> ingest -> coordinator -> check topic -> a responder with
kafka-python's default consumer settings -> COMMIT -> topics/<topic>.
"""

from __future__ import annotations

import base64
import os

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.protocol.ingress import HEADER_ALLOWANCE_BYTES
from tests.harness import TOPIC, Engine, Producer, Responder, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="20s",
        transaction_check_max="5",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


def test_a_half_of_max_message_size_is_checked_and_committed_once(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    body = os.urandom(config.max_message_size - 4096)
    responder = Responder(config, lambda request: "COMMIT")
    producer = Producer(config, max_request_size=config.max_message_size + HEADER_ALLOWANCE_BYTES)
    try:
        producer.half("big", body=body).get(timeout=60)
        producer.flush()

        def committed() -> bool:
            finals = table(spark, config, "system/transactions").collect()
            return any(r.transaction_id == "big" for r in finals)

        wait_for(committed, 300, "the big half to be decided")
    finally:
        producer.close()
        responder.stop()

    (final,) = table(spark, config, "system/transactions").collect()
    assert (final.transaction_id, final.state, final.reason) == ("big", "COMMITTED", "check")
    # The check reached the responder whole, through kafka-python's default fetch sizes.
    first = responder.requests[0]
    assert (first["transaction_id"], first["check_number"]) == ("big", 1)
    assert "omitted" not in first
    assert base64.b64decode(first["body_base64"]) == body
    # Delivered exactly once, with the full body.
    delivered = table(spark, config, f"topics/{TOPIC}").collect()
    assert [(r.transaction_id, r.queue_offset, bytes(r.body)) for r in delivered] == [
        ("big", 0, body)
    ]
    checks = table(spark, config, "system/check_requests").collect()
    assert checks and all(bytes(r.body) == body for r in checks)
