"""The answers rendered as JSON bytes off the event loop (coordinator/rest/answers.py): the
very shapes the models document, each body once. Pure: no Kafka, no app."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from coordinator.rest.answers import (
    ENVELOPE_ALLOWANCE,
    check_answer,
    item_budget,
    message_json,
    receive_answer,
)
from coordinator.rest.models import CheckRequest, CheckRequests, DeliveredMessage, ReceiveResult
from coordinator.sdk.consumer.message_view import MessageView

NOW = datetime(2026, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)


def message(body: bytes) -> MessageView:
    row = {
        "topic": "T", "queue_id": 1, "queue_offset": 7, "msg_id": "m", "transaction_id": "tx",
        "producer_group": "g", "body": body, "keys": ["k"], "tags": "A",
        "properties": [("p", "é")], "prepared_at": None, "committed_at": NOW,
        "delivered_at": NOW,
    }  # fmt: skip
    return MessageView.of_row(row, 2, 5)


def test_a_body_comes_once_in_the_encoding_asked_for() -> None:
    text, binary = message(b"\x00hello \xc3\xa9"), message(b"\xff\xfe")
    as_base64 = DeliveredMessage.model_validate_json(message_json(text, "r", "base64"))
    assert as_base64.body is None
    assert base64.b64decode(as_base64.body_base64 or "") == b"\x00hello \xc3\xa9"
    as_text = DeliveredMessage.model_validate_json(message_json(text, "r", "text"))
    assert (as_text.body, as_text.body_base64) == ("\x00hello é", None)
    not_utf8 = DeliveredMessage.model_validate_json(message_json(binary, "r", "text"))
    assert not_utf8.body is None and not_utf8.body_base64 == "//4="
    assert as_text.committed_at == "2026-01-02T03:04:05.678Z" and as_text.prepared_at is None
    assert (as_text.delivery_attempt, as_text.receipt, as_text.properties) == (2, "r", {"p": "é"})


def test_a_receive_answer_is_a_receive_result() -> None:
    parts = [message_json(message(b"a"), "r1", "text"), message_json(message(b"b"), "r2", "text")]
    answer = ReceiveResult.model_validate_json(receive_answer("member-1", parts))
    assert answer.member == "member-1" and [m.body for m in answer.messages] == ["a", "b"]
    assert json.loads(receive_answer("m", [])) == {"member": "m", "messages": []}
    # Its envelope fits the allowance, with the longest member id.
    envelope = receive_answer("m" * 255, [])
    assert len(envelope) <= ENVELOPE_ALLOWANCE
    assert item_budget(8 * 1024 * 1024, 32) == 8 * 1024 * 1024 - ENVELOPE_ALLOWANCE - 32


def test_a_check_answer_is_check_requests_each_rendered_once() -> None:
    value = {
        "transaction_id": "tx", "msg_id": None, "producer_group": "g", "topic": "T",
        "queue_id": 0, "body_base64": "AA==", "keys": [], "tags": None, "properties": {},
        "check_number": 1, "prepared_at_ms": 1, "requested_at_ms": 2, "omitted": [],
    }  # fmt: skip
    request = CheckRequest.model_validate(value)
    assert request.json_bytes() is request.json_bytes()
    answer = CheckRequests.model_validate_json(check_answer([request, request]))
    assert [r.transaction_id for r in answer.check_requests] == ["tx", "tx"]
    assert json.loads(check_answer([request]))["check_requests"][0]["omitted"] == []
