"""Message is checked when built; CheckRequest parses the check topic's JSON value."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest

from coordinator.protocol import ingress as fmt
from coordinator.sdk import CheckRequest, Message


def test_a_message_with_defaults() -> None:
    msg = Message(topic="OrderPaid")
    assert (msg.body, msg.keys, msg.tags, msg.properties) == (b"", (), None, {})
    assert (msg.queue_id, msg.check_immunity_seconds, msg.transaction_id) == (None, None, None)


def test_keys_become_a_tuple_and_a_lone_string_is_one_key() -> None:
    assert Message(topic="T", keys=["o-1", "o-2"]).keys == ("o-1", "o-2")
    assert Message(topic="T", keys="o-1").keys == ("o-1",)


def test_body_may_be_any_bytes_like_value() -> None:
    assert Message(topic="T", body=bytearray(b"\x00\xff")).body == b"\x00\xff"  # type: ignore[arg-type]


def test_a_message_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Message(topic="T").topic = "U"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"topic": "no spaces"}, ValueError, "topic must be 1-127 characters"),
        ({"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}, ValueError, "system topic"),
        ({"topic": 7}, ValueError, "topic must be a string"),
        ({"body": "text"}, TypeError, "encode the text first"),
        ({"body": 12}, TypeError, "body must be bytes"),
        ({"keys": [1]}, TypeError, "keys must be strings"),
        ({"keys": 5}, TypeError, "keys must be a list"),
        ({"tags": 5}, TypeError, "tags must be a string"),
        ({"properties": {"a": 1}}, TypeError, r"properties\['a'\] must be a string"),
        ({"properties": {"": "x"}}, ValueError, "property name must be a string of 1-255"),
        ({"properties": {"a\nb": "x"}}, ValueError, "without control characters"),
        ({"properties": {"p": "v" * fmt.HEADER_BUDGET}}, ValueError, "bytes together"),
        ({"tags": "t" * fmt.HEADER_BUDGET}, ValueError, "bytes together"),
        ({"topic": "OrderPaid\n"}, ValueError, "topic must be 1-127 characters"),
        ({"transaction_id": "tx-1\n"}, ValueError, "transaction_id must be 1-128"),
        ({"properties": ["a"]}, TypeError, "properties must be a mapping"),
        ({"queue_id": 1024}, ValueError, "queue_id must be 0..1023"),
        ({"queue_id": -1}, ValueError, "queue_id must be 0..1023"),
        ({"queue_id": True}, TypeError, "queue_id must be an integer"),
        ({"check_immunity_seconds": -1}, ValueError, "check_immunity_seconds must be >= 0"),
        ({"transaction_id": ""}, ValueError, "transaction_id must be 1-128"),
        ({"transaction_id": "x" * 129}, ValueError, "transaction_id must be 1-128"),
        ({"transaction_id": "tab\there"}, ValueError, "transaction_id must be 1-128"),
    ],
)
def test_a_bad_field_is_refused_with_its_name(
    fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        Message(**{"topic": "T", **fields})


def check_value(**overrides: Any) -> dict[str, Any]:
    value = {
        "transaction_id": "tx-1", "msg_id": "0000000000000000002A", "producer_group": "orders",
        "topic": "OrderPaid", "queue_id": 2, "body_base64": base64.b64encode(b"\x00body").decode(),
        "keys": ["o-1"], "tags": "paid", "properties": {"region": "eu"}, "check_number": 3,
        "prepared_at_ms": 1_700_000_000_000, "requested_at_ms": 1_700_000_006_000,
    }  # fmt: skip
    value.update(overrides)
    return value


def test_a_check_request_parses_the_check_topic_value() -> None:
    request = CheckRequest.from_json(json.dumps(check_value()).encode(), source=("c", 1, 5))
    assert request.transaction_id == "tx-1"
    assert request.body == b"\x00body"
    assert (request.keys, request.tags, request.properties) == (("o-1",), "paid", {"region": "eu"})
    assert (request.queue_id, request.check_number, request.key) == (2, 3, ("tx-1", 3))
    assert request.source == ("c", 1, 5)
    assert request.requested_at_ms == 1_700_000_006_000


def test_a_check_request_is_message_like() -> None:
    request = CheckRequest.from_json(check_value())
    msg = request.message
    assert msg == Message(
        topic="OrderPaid",
        body=b"\x00body",
        keys=("o-1",),
        tags="paid",
        properties={"region": "eu"},
        queue_id=2,
        transaction_id="tx-1",
        msg_id="0000000000000000002A",
    )
    for name in (
        "topic",
        "body",
        "keys",
        "tags",
        "properties",
        "queue_id",
        "transaction_id",
        "msg_id",
        "check_immunity_seconds",
    ):
        assert getattr(request, name) == getattr(msg, name)


def test_source_takes_no_part_in_equality() -> None:
    assert CheckRequest.from_json(check_value(), ("c", 0, 1)) == CheckRequest.from_json(
        check_value(), ("c", 0, 2)
    )


def test_null_collections_and_queue_are_accepted() -> None:
    request = CheckRequest.from_json(
        check_value(keys=None, properties=None, tags=None, queue_id=None, body_base64="")
    )
    assert (request.keys, request.properties, request.queue_id, request.body) == ((), {}, None, b"")


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (b"{not json", "not JSON"),
        (b"\xff", "not JSON"),
        (b"[1]", "must be a JSON object"),
        (json.dumps(check_value(transaction_id=None)), "'transaction_id' is missing"),
        (json.dumps(check_value(check_number="3")), "'check_number' is missing or not"),
        (json.dumps(check_value(check_number=True)), "'check_number' is missing or not"),
        (json.dumps(check_value(body_base64="@@@")), "'body_base64' is not base64"),
        (json.dumps(check_value(keys="o-1")), "'keys' is not a list"),
        (json.dumps(check_value(properties={"a": 1})), "'properties' is not a string map"),
        (json.dumps(check_value(queue_id="2")), "'queue_id' is not an integer"),
        (json.dumps(check_value(tags=1)), "'tags' is not a string"),
    ],
)
def test_a_malformed_check_request_is_refused(value: bytes | str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CheckRequest.from_json(value)
