"""The Kafka path on a secured broker: SASL SCRAM, the StandardAuthorizer and our ACLs.

Every client here is the product's own (SDK transport, REST writer and check poller, health
probes, Spark source), built from the one security setting (coordinator/core/kafka_security.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.errors import (
    GroupAuthorizationFailedError,
    KafkaError,
    TopicAuthorizationFailedError,
)

from coordinator.admin.shared_topics import findings
from coordinator.core.errors import KafkaUnavailableError
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import engine_grants
from coordinator.kafka_clients import producer as kafka_producer
from coordinator.kafka_clients.admin import admin_client
from coordinator.protocol import ingress as fmt
from coordinator.protocol.records import half_headers, op_headers
from coordinator.rest import kafka_writer
from coordinator.rest.app import ensure_topic
from coordinator.rest.check_poll import CheckPoller
from coordinator.rest.kafka_writer import KafkaWriter
from coordinator.rest.records import Record
from coordinator.runtime.local_stack.health import check_kafka, check_spark
from coordinator.sdk import LocalTransactionState, Message, TransactionProducer, TransportError
from coordinator.sdk.kafka_transport import KafkaTransport
from streams.query.batch_writer import check_record
from tests.coordinator.sdk.helpers import RecordingListener, wait_until

from .conftest import SecuredKafka, publish, read_all

pytestmark = [pytest.mark.kafka, pytest.mark.long]


def check_of(transaction_id: str, group: str) -> tuple[bytes, bytes, Any]:
    """Return a check-topic record as the coordinator writes it."""
    row = {
        "transaction_id": transaction_id, "msg_id": "0000000000000000002A",
        "producer_group": group, "topic": "OrderPaid", "queue_id": 1, "body": b"paid",
        "keys": ["o-1"], "tags": "paid", "properties": {}, "check_number": 1,
        "prepared_ms": 1_700_000_000_000, "at_ms": 1_700_000_006_000,
    }  # fmt: skip
    return check_record(row)


@pytest.fixture
def stranger(secured_kafka: SecuredKafka, tmp_path: Any) -> Iterator[KafkaSecurity]:
    """Return the settings of a principal with a SCRAM credential but no ACL at all."""
    password = tmp_path / "stranger.password"
    password.write_text("stranger-password-0123456789")
    password.chmod(0o600)
    with admin_client(secured_kafka.bootstrap_servers, security=secured_kafka.security_of()) as a:
        a.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "stranger", ScramMechanism.SCRAM_SHA_256, password.read_text()
                )
            ]
        )
    yield KafkaSecurity(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="stranger",
        sasl_password_file=str(password),
    )


def test_the_acls_are_the_documented_ones(secured_kafka: SecuredKafka) -> None:
    layout = secured_kafka.layout
    with admin_client(secured_kafka.bootstrap_servers, security=secured_kafka.security_of()) as a:
        everything = ACLFilter(
            None,
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
        )
        found, _ = a.describe_acls(everything)  # an error would have raised
    granted = {
        (
            acl.principal,
            acl.operation.name,
            acl.resource_pattern.resource_name,
            acl.resource_pattern.pattern_type.name,
        )
        for acl in found
    }
    expected = {
        ("User:txcoord-operator", "WRITE", layout.operator_topic("txcoord-operator"), "LITERAL")
    }
    for group in ("orders", "payments"):
        expected |= {
            (f"User:{group}-app", "WRITE", layout.half_topic(group), "LITERAL"),
            (f"User:{group}-app", "WRITE", layout.op_topic(group), "LITERAL"),
            (f"User:{group}-app", "READ", layout.check_topic(group), "LITERAL"),
            (f"User:{group}-app", "WRITE", layout.check_topic(group), "LITERAL"),
            (f"User:{group}-app", "READ", f"txcoord-sdk-{group}", "LITERAL"),
        }
    # The engine's transactional ids (streams/kafka_io/kafka_fence.py): a super user here, granted
    # what a managed cluster must grant it.
    warehouse = secured_kafka.config.warehouse
    expected |= {
        (f"User:{g.principal}", g.operation, g.name, "LITERAL")
        for g in engine_grants("txcoord-engine", warehouse)
    }
    assert granted == expected


def test_the_sdk_sends_and_answers_checks_over_sasl(secured_kafka: SecuredKafka) -> None:
    kafka, layout = secured_kafka.config.kafka, secured_kafka.layout
    listener = RecordingListener()  # commits, and answers checks with commit
    producer = TransactionProducer(
        group="orders",
        listener=listener,
        bootstrap_servers=kafka.bootstrap_servers,
        kafka_security=secured_kafka.security_of("orders"),
        half_topic=kafka.half_topic,
        op_topic=kafka.op_topic,
        check_topic=kafka.check_topic,
        topics_per_group=True,
        poll_wait_seconds=0.2,
    )
    producer.start()
    try:
        result = producer.send_message_in_transaction(Message(topic="OrderPaid", body=b"x"), 1)
        assert result.local_state == LocalTransactionState.COMMIT_MESSAGE
        assert result.op_id is not None
        engine = secured_kafka.security_of()
        (half,) = read_all(kafka.bootstrap_servers, layout.half_topic("orders"), 1, engine)
        assert half.key.decode() == result.transaction_id
        publish(
            kafka.bootstrap_servers,
            layout.check_topic("orders"),
            [check_of("tx-checked", "orders")],
            engine,
        )
        wait_until(lambda: listener.check_counts()[("tx-checked", 1)] >= 1, timeout=60)
        ops = read_all(kafka.bootstrap_servers, layout.op_topic("orders"), 2, engine)
        by_id = {r.key.decode(): dict(r.headers) for r in ops}
        assert by_id["tx-checked"][fmt.FROM_CHECK] == b"true"
        assert by_id[result.transaction_id][fmt.OP] == b"COMMIT"
    finally:
        producer.shutdown(timeout=5)


def test_the_rest_writer_and_check_poller_work_over_sasl(secured_kafka: SecuredKafka) -> None:
    kafka, layout = secured_kafka.config.kafka, secured_kafka.layout
    engine = secured_kafka.security_of()  # the REST ingress runs as the engine
    writer = KafkaWriter(
        kafka.bootstrap_servers,
        layout,
        max_message_size=1024,
        security=engine,
        principal=engine.sasl_username,
        ensure_topic=functools.partial(ensure_topic, secured_kafka.config),
    )
    poller = CheckPoller(kafka.bootstrap_servers, layout, security=engine)
    try:
        headers = half_headers("payments", "OrderPaid", int(time.time() * 1000))
        stored = writer.send_half(Record(key=b"tx-rest", value=b"body", headers=headers))
        assert stored.offset >= 0
        (half,) = read_all(kafka.bootstrap_servers, layout.half_topic("payments"), 1, engine)
        assert half.key == b"tx-rest"
        # An admin token's op goes to the engine's own operator topic (created on first use),
        # never to the shared op topic, where the ingest would quarantine it.
        now = int(time.time() * 1000)
        by_admin = op_headers("payments", "COMMIT", False, now, operator="admin (Alice)")
        writer.send_op(Record(key=b"tx-rest", value=b"", headers=by_admin))
        own = layout.operator_topic(engine.sasl_username)
        (op,) = read_all(kafka.bootstrap_servers, own, 1, engine)
        assert (op.key, dict(op.headers)[fmt.OPERATOR]) == (b"tx-rest", b"admin (Alice)")
        publish(
            kafka.bootstrap_servers,
            layout.check_topic("payments"),
            [check_of("tx-poll", "payments")],
            engine,
        )
        deadline, seen = time.monotonic() + 60, list[Any]()
        while not seen and time.monotonic() < deadline:
            seen = [c for c in poller.poll("payments", 10, 1.0) if c.transaction_id == "tx-poll"]
        assert seen
    finally:
        writer.close()
        poller.close()


def refused(security: KafkaSecurity, bootstrap: str, topic: str) -> bool:
    """Return True if the broker refuses `security`'s principal a write to `topic`."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", max_block_ms=20_000, **security.client_options()
    )
    started = time.monotonic()
    try:
        producer.send(topic, key=b"tx", value=b"x").get(timeout=30)
    except TopicAuthorizationFailedError:
        assert time.monotonic() - started < 25  # refused, not timed out
        return True
    finally:
        producer.close(timeout=5)
    return False


def test_a_principal_without_an_acl_is_refused_by_the_broker(
    secured_kafka: SecuredKafka, stranger: KafkaSecurity
) -> None:
    layout, bootstrap = secured_kafka.layout, secured_kafka.bootstrap_servers
    assert refused(stranger, bootstrap, layout.half_topic("orders"))
    assert refused(stranger, bootstrap, layout.half)


def test_a_group_cannot_write_another_groups_topics_nor_the_shared_ones(
    secured_kafka: SecuredKafka,
) -> None:
    layout, bootstrap = secured_kafka.layout, secured_kafka.bootstrap_servers
    orders = secured_kafka.security_of("orders")
    for topic in (
        layout.half_topic("payments"),
        layout.op_topic("payments"),
        layout.half,
        layout.op,
        layout.operator_topic("txcoord-operator"),
        layout.check_topic("payments"),
        layout.check,
    ):
        assert refused(orders, bootstrap, topic), topic
    # Its own ingress topics, and its own check topic (for claims: contract 5.2).
    for topic in (
        layout.half_topic("orders"),
        layout.op_topic("orders"),
        layout.check_topic("orders"),
    ):
        assert not refused(orders, bootstrap, topic), topic


def test_a_group_cannot_read_another_groups_checks(secured_kafka: SecuredKafka) -> None:
    layout, bootstrap = secured_kafka.layout, secured_kafka.bootstrap_servers
    engine = secured_kafka.security_of()
    topic = layout.check_topic("payments")
    publish(bootstrap, topic, [check_of("tx-secret", "payments")], engine)
    assert read_all(bootstrap, topic, 1, engine)  # there is something to read
    orders = secured_kafka.security_of("orders").client_options()
    # Another group's check topic, read directly: the broker answers its metadata with
    # TOPIC_AUTHORIZATION_FAILED (kafka-python records it rather than raising) and no
    # record ever arrives.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **orders)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        consumer.seek_to_beginning()
        # Positive marker: the broker's refusal of the topic's metadata (no leader to fetch
        # from after it), with nothing read until then, nor once more after it.
        deadline = time.monotonic() + 60
        while topic not in consumer._client.cluster.unauthorized_topics:
            assert time.monotonic() < deadline, "the broker never refused the topic"
            assert not consumer.poll(timeout_ms=500)
        assert not consumer.poll(timeout_ms=500)
    finally:
        consumer.close(autocommit=False)
    # Another group's consumer group, on its own check topic: refused too (polled until the
    # group's coordinator answers: its lookup and join take seconds on a loaded machine).
    consumer = KafkaConsumer(
        layout.check_topic("orders"),
        bootstrap_servers=bootstrap,
        group_id="txcoord-sdk-payments",
        **orders,
    )
    try:
        deadline = time.monotonic() + 60
        with pytest.raises(GroupAuthorizationFailedError):
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=1000)
    finally:
        consumer.close(autocommit=False)


def test_the_operator_may_write_its_operator_topic_only(secured_kafka: SecuredKafka) -> None:
    layout, bootstrap = secured_kafka.layout, secured_kafka.bootstrap_servers
    operator = secured_kafka.security_of(role="operator")
    assert not refused(operator, bootstrap, layout.operator_topic("txcoord-operator"))
    for topic in (
        layout.op,
        layout.op_topic("orders"),
        layout.half_topic("orders"),
        layout.operator_topic("orders-app"),
    ):
        assert refused(operator, bootstrap, topic), topic


def test_wrong_credentials_fail_at_start_with_a_clear_error(
    secured_kafka: SecuredKafka, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = tmp_path / "wrong.password"
    wrong.write_text("not-the-password-0123456789")
    wrong.chmod(0o600)
    security = KafkaSecurity(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="orders-app",
        sasl_password_file=str(wrong),
    )
    kafka = secured_kafka.config.kafka
    started = time.monotonic()
    with pytest.raises(TransportError) as caught:
        KafkaTransport(
            kafka.bootstrap_servers,
            "orders",
            half_topic=kafka.half_topic,
            op_topic=kafka.op_topic,
            check_topic=kafka.check_topic,
            topics_per_group=True,
            send_timeout_seconds=8,
            security=security,
        )
    assert time.monotonic() - started < 30
    assert "login as 'orders-app'" in str(caught.value)
    assert "authentication failed" in str(caught.value)
    assert wrong.read_text() not in str(caught.value)
    # The REST ingress's writer says the same (its 503 message, and its log), at the
    # broker's refusal, not at the end of its bootstrap timeout of retries: here 120 s
    # instead of 5, so the two cannot be mistaken for each other on a loaded machine.
    monkeypatch.setattr(
        kafka_writer, "connect", functools.partial(kafka_producer.connect, timeout_ms=120_000)
    )
    writer = KafkaWriter(
        kafka.bootstrap_servers, kafka.layout, max_message_size=1024, security=security
    )
    headers = half_headers("orders", "OrderPaid", int(time.time() * 1000))
    started = time.monotonic()
    try:
        with pytest.raises(KafkaUnavailableError, match="login as 'orders-app'"):
            writer.send_half(Record(key=b"tx-wrong", value=b"body", headers=headers))
    finally:
        writer.close()
    assert time.monotonic() - started < 60


def test_the_health_probes_and_the_spark_source_read_over_sasl(
    secured_kafka: SecuredKafka, spark: Any, tmp_path: Any
) -> None:
    engine = secured_kafka.security_of()
    bootstrap = secured_kafka.bootstrap_servers
    kafka = check_kafka(bootstrap, engine)
    assert kafka.healthy, kafka
    probe = check_spark(spark, tmp_path / "health", bootstrap, engine)
    assert probe.healthy, probe
    assert "kafka connector" in probe.detail


def test_a_plaintext_client_gets_nothing_from_the_secured_listener(
    secured_kafka: SecuredKafka,
) -> None:
    with pytest.raises(KafkaError):
        KafkaProducer(
            bootstrap_servers=secured_kafka.bootstrap_servers,
            bootstrap_timeout_ms=5_000,
            max_block_ms=5_000,
        )


def test_a_producer_of_a_group_without_topics_is_told_at_start(
    secured_kafka: SecuredKafka,
) -> None:
    kafka = secured_kafka.config.kafka
    with pytest.raises(TransportError, match="topics of producer group 'refunds' do not exist"):
        KafkaTransport(
            kafka.bootstrap_servers,
            "refunds",
            half_topic=kafka.half_topic,
            op_topic=kafka.op_topic,
            check_topic=kafka.check_topic,
            topics_per_group=True,
            send_timeout_seconds=10,
            security=secured_kafka.security_of(),
        )


def test_the_engine_topics_check_finds_broad_grants(secured_kafka: SecuredKafka) -> None:
    config, layout = secured_kafka.config, secured_kafka.layout
    # The secured local stack: deny by default, literal grants, the engine alone writes them.
    assert findings(config) == []
    # The mistakes the docs warn about: prefixed grants that cover the shared op topic (as
    # "txcoord." covers "txcoord.op"), and every operator topic, the engine's own among them.
    on_op, on_operators = layout.op[:-2], layout.operator + "."
    broad = [
        ACL(
            "User:orders-app", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, prefix, ACLResourcePatternType.PREFIXED),
        )
        for prefix in (on_op, on_operators)
    ]  # fmt: skip
    with admin_client(secured_kafka.bootstrap_servers, security=secured_kafka.security_of()) as a:
        a.create_acls(broad)
        try:
            # ACLs reach the authorizer through the metadata log: wait until both are seen.
            found: list[str] = []

            def both_seen() -> bool:
                found[:] = sorted(findings(config))
                return len(found) >= 2

            wait_until(both_seen, 30, "the two broad grants in the broker's ACLs")
        finally:
            a.delete_acls(broad)
    own = layout.operator_topic(config.kafka.principal)
    assert len(found) == 2, found
    assert all(f.startswith("User:orders-app may WRITE topic(s) ") for f in found), found
    by_op, by_operators = sorted(found, key=lambda f: on_operators in f)
    assert f"{layout.op} through the prefixed grant on {on_op!r}" in by_op, found
    assert "only the engine's heartbeats belong there" in by_op, found
    assert f"{own} through the prefixed grant on {on_operators!r}" in by_operators, found
    assert f"on {own} it can act as any operator" in by_operators, found
