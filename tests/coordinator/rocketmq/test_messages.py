"""A RocketMQ message <-> a half and a check-back (coordinator/rocketmq/messages.py), and the
official client reading the check-back as its TransactionChecker sees it."""

from __future__ import annotations

import base64
import gzip

import pytest
from rocketmq.grpc_protocol import Code, Encoding, MessageType
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.v5.model import Message

from coordinator.protocol import ingress as fmt
from coordinator.rest.models import CheckRequest
from coordinator.rocketmq.codes import RefusedError
from coordinator.rocketmq.messages import (
    BORN_HOST,
    BORN_TIMESTAMP,
    check_command,
    half_request,
    instance_of,
)

MAX = 1024


def message(body: bytes = b"paid", **system: object) -> pb.Message:
    made = pb.Message(body=body)
    made.topic.name = "Orders"
    made.system_properties.message_id = "01AB"
    made.system_properties.message_type = MessageType.TRANSACTION
    for name, value in system.items():
        setattr(made.system_properties, name, value)
    return made


def refused(made: pb.Message, max_size: int = MAX) -> int:
    with pytest.raises(RefusedError) as caught:
        half_request(made, "orders", "rmq-1", max_size)
    return caught.value.code


def test_a_transactional_message_becomes_the_rest_ingress_s_half() -> None:
    made = message(tag="TagA", born_host="10.0.0.7")
    made.system_properties.keys.extend(["o-1", "o-2"])
    made.system_properties.born_timestamp.FromMilliseconds(1_700_000_000_123)
    made.system_properties.orphaned_transaction_recovery_duration.FromMilliseconds(2_500)
    made.user_properties["order"] = "o-1"
    made.user_properties[BORN_HOST] = "forged"  # the endpoint's own property: replaced
    half = half_request(made, "orders", "rmq-1", MAX)
    assert (half.producer_group, half.topic, half.transaction_id) == ("orders", "Orders", "01AB")
    assert (half.body_bytes, half.keys, half.tags) == (b"paid", ["o-1", "o-2"], "TagA")
    assert half.check_immunity_seconds == 3  # rounded up
    assert half.properties == {
        "order": "o-1",
        fmt.PRODUCER_INSTANCE_PROPERTY: "rmq-1",
        BORN_TIMESTAMP: "1700000000123",
        BORN_HOST: "10.0.0.7",
    }


def test_a_gzip_body_is_inflated_within_the_limit() -> None:
    inflated = half_request(
        message(gzip.compress(b"x" * MAX), body_encoding=Encoding.GZIP), "g", "i", MAX
    )
    assert inflated.body_bytes == b"x" * MAX
    bomb = message(gzip.compress(b"x" * (100 * MAX)), body_encoding=Encoding.GZIP)
    assert refused(bomb) == Code.MESSAGE_BODY_TOO_LARGE
    assert refused(message(b"not gzip", body_encoding=Encoding.GZIP)) == Code.MESSAGE_CORRUPTED
    truncated = gzip.compress(b"x" * 100)[:-12]
    assert refused(message(truncated, body_encoding=Encoding.GZIP)) == Code.MESSAGE_CORRUPTED


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        (MessageType.NORMAL, Code.UNSUPPORTED),
        (MessageType.FIFO, Code.UNSUPPORTED),
        (MessageType.DELAY, Code.UNSUPPORTED),
        (MessageType.MESSAGE_TYPE_UNSPECIFIED, Code.UNSUPPORTED),
    ],
)
def test_other_message_types_are_unsupported(kind: int, code: int) -> None:
    assert refused(message(message_type=kind)) == code


def test_what_a_half_cannot_carry_is_refused_with_its_code() -> None:
    assert refused(message(b"x" * (MAX + 1))) == Code.MESSAGE_BODY_TOO_LARGE
    assert refused(message(b"")) == Code.MESSAGE_BODY_EMPTY
    assert refused(message(message_group="g")) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert refused(message(message_id="")) == Code.ILLEGAL_MESSAGE_ID
    assert refused(message(message_id="bad\nid")) == Code.ILLEGAL_MESSAGE_ID
    bad_property = message()
    bad_property.user_properties["bad\x01name"] = "v"
    assert refused(bad_property) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    namespaced = message()
    namespaced.topic.resource_namespace = "ns"
    assert refused(namespaced) == Code.UNSUPPORTED


def test_an_instance_id_is_a_stable_digest_of_the_client_id() -> None:
    first = instance_of("host@123@0@abc")
    assert first == instance_of("host@123@0@abc") != instance_of("host@123@1@abc")
    assert len(first) <= 64 and "@" not in first


def test_the_check_back_is_the_half_as_the_client_s_checker_reads_it() -> None:
    check = CheckRequest(
        transaction_id="01AB",
        msg_id="0-7",
        producer_group="orders",
        topic="Orders",
        queue_id=2,
        body_base64=base64.b64encode(b"paid").decode(),
        keys=["o-1"],
        tags="TagA",
        properties={
            "order": "o-1",
            BORN_TIMESTAMP: "1700000000123",
            BORN_HOST: "10.0.0.7",
            fmt.PRODUCER_INSTANCE_PROPERTY: "rmq-1",
        },
        check_number=3,
        prepared_at_ms=1_700_000_001_000,
        requested_at_ms=1_700_000_009_000,
    )
    command = check_command(check).recover_orphaned_transaction_command
    assert command.transaction_id == "01AB"
    seen = Message().fromProtobuf(command.message)  # the official client's own decoding
    assert (seen.topic, seen.body, seen.tag, seen.keys) == ("Orders", b"paid", "TagA", {"o-1"})
    assert (seen.message_id, seen.message_type) == ("01AB", MessageType.TRANSACTION)
    assert (seen.born_host, seen.born_timestamp) == ("10.0.0.7", 1_700_000_000_123)
    assert seen.properties == {"order": "o-1"}
    assert seen.delivery_attempt == 3
    assert command.message.system_properties.queue_id == 2
