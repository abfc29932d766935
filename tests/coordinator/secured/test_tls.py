"""TLS once: a CA and a broker certificate made for the test, SASL_SSL end to end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError

from coordinator.core.errors import KafkaUnavailableError
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.protocol import ingress as fmt
from coordinator.protocol.records import half_headers
from coordinator.rest.kafka_writer import KafkaWriter
from coordinator.rest.records import Record
from coordinator.runtime.local_stack.health import check_kafka, check_spark
from coordinator.sdk import LocalTransactionState, Message, TransactionProducer
from tests.coordinator.sdk.helpers import RecordingListener

from .conftest import SecuredKafka, read_all, start_secured

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def tls_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """Return a SASL_SSL broker of this module, its certificate signed by a test CA."""
    secured = start_secured(tmp_path_factory.mktemp("tls"), tls=True)
    try:
        yield secured
    finally:
        secured.broker.stop()


def test_the_sdk_sends_over_sasl_ssl(tls_kafka: SecuredKafka) -> None:
    kafka = tls_kafka.config.kafka
    security = tls_kafka.security_of("orders")
    assert security.security_protocol == "SASL_SSL" and security.ssl_cafile
    producer = TransactionProducer(
        group="orders",
        listener=RecordingListener(),
        bootstrap_servers=kafka.bootstrap_servers,
        kafka_security=security,
        half_topic=kafka.half_topic,
        op_topic=kafka.op_topic,
        check_topic=kafka.check_topic,
        topics_per_group=True,
        poll_wait_seconds=0.2,
    )
    producer.start()
    try:
        sent = producer.send_message_in_transaction(Message(topic="OrderPaid", body=b"tls"), 1)
    finally:
        producer.shutdown(timeout=5)
    assert sent.local_state == LocalTransactionState.COMMIT_MESSAGE
    (half,) = read_all(
        kafka.bootstrap_servers, kafka.layout.half_topic("orders"), 1, tls_kafka.security_of()
    )
    assert half.value == b"tls"
    assert dict(half.headers)[fmt.PRODUCER_GROUP] == b"orders"


def test_the_rest_writer_sends_over_sasl_ssl_and_refuses_an_untrusted_broker(
    tls_kafka: SecuredKafka,
) -> None:
    """The REST ingress's writer is librdkafka's: its own spelling of the same settings."""
    kafka, engine = tls_kafka.config.kafka, tls_kafka.security_of()
    headers = half_headers("orders", "OrderPaid", int(time.time() * 1000))
    record = Record(key=b"tx-rest-tls", value=b"rest over tls", headers=headers)
    writer = KafkaWriter(
        kafka.bootstrap_servers, kafka.layout, max_message_size=1024, security=engine
    )
    try:
        stored = writer.send_half(record)
    finally:
        writer.close()
    found = read_all(
        kafka.bootstrap_servers, kafka.layout.half_topic("orders"), stored.offset + 1, engine
    )
    (half,) = [r for r in found if r.key == b"tx-rest-tls"]
    assert (half.value, half.offset) == (b"rest over tls", stored.offset)
    untrusting = KafkaSecurity(**{**engine.__dict__, "ssl_cafile": ""})  # the system's CAs
    writer = KafkaWriter(
        kafka.bootstrap_servers, kafka.layout, max_message_size=1024, security=untrusting
    )
    started = time.monotonic()
    try:
        with pytest.raises(KafkaUnavailableError, match="cannot be reached"):
            writer.send_half(record)
    finally:
        writer.close()
    assert time.monotonic() - started < 20


def test_a_client_that_does_not_trust_the_ca_is_refused(tls_kafka: SecuredKafka) -> None:
    trusting = tls_kafka.security_of("orders")
    untrusting = KafkaSecurity(**{**trusting.__dict__, "ssl_cafile": ""})  # the system's CAs
    started = time.monotonic()
    with pytest.raises(KafkaError):
        KafkaProducer(
            bootstrap_servers=tls_kafka.bootstrap_servers,
            bootstrap_timeout_ms=5_000,
            **untrusting.client_options(),
        )
    assert time.monotonic() - started < 20


def test_the_spark_source_reads_over_sasl_ssl(
    tls_kafka: SecuredKafka, spark: Any, tmp_path: Any
) -> None:
    engine = tls_kafka.security_of()
    kafka = check_kafka(tls_kafka.bootstrap_servers, engine)
    assert kafka.healthy, kafka
    probe = check_spark(spark, tmp_path / "health", tls_kafka.bootstrap_servers, engine)
    assert probe.healthy, probe
