"""The SDK over the real REST app (coordinator/rest), served by uvicorn, on the real broker."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.core.config import load_config
from coordinator.protocol import ingress as fmt
from coordinator.protocol.ingress import msg_id_of, op_id_of
from coordinator.rest.app import create_app
from coordinator.sdk import (
    LocalTransactionState,
    Message,
    RequestRejectedError,
    TransactionProducer,
)

from .conftest import SdkTopics, publish, read_records
from .helpers import RecordingListener, State, wait_until
from .http_server import serving
from .test_kafka_transport import check_of, headers_of

pytestmark = pytest.mark.kafka

OUR_TOKEN = "our-group-token-0123"
OTHER_TOKEN = "other-group-token-0123"


@pytest.fixture
def ingress(sdk_topics: SdkTopics, tmp_path: Path) -> Iterator[str]:
    """Serve the real REST app on the test's topics, with tokens for two groups."""
    auth_file = tmp_path / "tokens.toml"
    ours = hashlib.sha256(OUR_TOKEN.encode()).hexdigest()
    other = hashlib.sha256(OTHER_TOKEN.encode()).hexdigest()
    auth_file.write_text(
        f'[[token]]\ngroup = "{sdk_topics.group}"\nsha256 = "{ours}"\n\n'
        f'[[token]]\ngroup = "payments"\nsha256 = "{other}"\n'
    )
    auth_file.chmod(0o600)  # the ingress refuses a token file others may read
    config = load_config(
        overrides={
            "warehouse": str(tmp_path / "warehouse"),
            "kafka.bootstrap_servers": sdk_topics.bootstrap_servers,
            "kafka.half_topic": sdk_topics.half,
            "kafka.op_topic": sdk_topics.op,
            "kafka.check_topic": sdk_topics.check,
            "rest.auth_file": str(auth_file),
        }
    )
    with serving(create_app(config)) as url:
        yield url


@pytest.fixture
def rest_producers(sdk_topics: SdkTopics, ingress: str) -> Iterator[list[TransactionProducer]]:
    """Collect producers to shut down after the test."""
    made: list[TransactionProducer] = []
    yield made
    for producer in made:
        producer.shutdown(timeout=2)


def test_a_send_over_rest_stores_the_half_then_the_op(
    sdk_topics: SdkTopics, ingress: str, rest_producers: list[TransactionProducer]
) -> None:
    listener = RecordingListener(execute=State.ROLLBACK_MESSAGE)
    producer = TransactionProducer(
        group=sdk_topics.group,
        listener=listener,
        endpoint=ingress,
        token=OUR_TOKEN,
        poll_wait_seconds=1,
    )
    rest_producers.append(producer)
    producer.start()
    result = producer.send_message_in_transaction(
        Message(topic="OrderPaid", body=b"\x00paid", keys=["o-1"], properties={"region": "eu"}),
        arg="order-1",
    )
    (half,) = read_records(sdk_topics.bootstrap_servers, sdk_topics.half, 1)
    assert half.key == result.transaction_id.encode()
    assert half.value == b"\x00paid"
    headers = headers_of(half)
    assert headers[fmt.PRODUCER_GROUP] == sdk_topics.group.encode()
    assert headers[fmt.TOPIC] == b"OrderPaid"
    assert headers["prop.region"] == b"eu"
    assert result.msg_id == msg_id_of(half.partition, half.offset)
    assert int(result.stored_at.timestamp() * 1000) == half.timestamp

    (op,) = read_records(sdk_topics.bootstrap_servers, sdk_topics.op, 1)
    assert op.key == result.transaction_id.encode()
    assert (headers_of(op)[fmt.OP], headers_of(op)[fmt.FROM_CHECK]) == (b"ROLLBACK", b"false")
    assert result.op_id == op_id_of(op.partition, op.offset)
    assert result.local_state is LocalTransactionState.ROLLBACK_MESSAGE
    ((msg, arg),) = listener.executed
    assert (msg.transaction_id, arg) == (result.transaction_id, "order-1")


def test_a_check_request_is_long_polled_and_answered_over_rest(
    sdk_topics: SdkTopics, ingress: str, rest_producers: list[TransactionProducer]
) -> None:
    listener = RecordingListener(check=lambda r: State.COMMIT_MESSAGE)
    producer = TransactionProducer(
        group=sdk_topics.group,
        listener=listener,
        endpoint=ingress,
        token=OUR_TOKEN,
        poll_wait_seconds=1,
    )
    rest_producers.append(producer)
    producer.start()
    publish(
        sdk_topics.bootstrap_servers,
        sdk_topics.check,
        [check_of("tx-other", "payments"), check_of("tx-1", sdk_topics.group, 3)],
    )
    wait_until(lambda: producer.check_stats().answered == 1, what="the answer over REST")
    (request,) = listener.checked
    assert (request.transaction_id, request.check_number, request.body) == ("tx-1", 3, b"\x00paid")
    (op,) = read_records(sdk_topics.bootstrap_servers, sdk_topics.op, 1)
    assert op.key == b"tx-1"
    assert (headers_of(op)[fmt.OP], headers_of(op)[fmt.FROM_CHECK]) == (b"COMMIT", b"true")


def test_another_groups_token_is_refused_with_the_contract_error(
    sdk_topics: SdkTopics, ingress: str, rest_producers: list[TransactionProducer]
) -> None:
    producer = TransactionProducer(
        group=sdk_topics.group, listener=RecordingListener(), endpoint=ingress, token=OTHER_TOKEN
    )
    rest_producers.append(producer)
    producer.start()
    with pytest.raises(RequestRejectedError) as caught:
        producer.send_message_in_transaction(Message(topic="OrderPaid"))
    assert (caught.value.status, caught.value.code) == (403, "forbidden")


def test_a_missing_token_is_unauthorized(
    sdk_topics: SdkTopics, ingress: str, rest_producers: list[TransactionProducer]
) -> None:
    producer = TransactionProducer(
        group=sdk_topics.group, listener=RecordingListener(), endpoint=ingress
    )
    rest_producers.append(producer)
    producer.start()
    with pytest.raises(RequestRejectedError) as caught:
        producer.send_message_in_transaction(Message(topic="OrderPaid"))
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")
