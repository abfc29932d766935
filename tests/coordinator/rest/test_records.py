"""Pure parts: request -> Kafka record, ids, times, error names (no broker needed)."""

from __future__ import annotations

import json

import pytest

from coordinator.protocol import ingress as fmt
from coordinator.rest.errors import ApiError, field_name, printable
from coordinator.rest.models import OpRequest, SendRequest
from coordinator.rest.records import HEADER_BUDGET, half_record, op_record, rfc3339


def test_ids_are_fixed_width_uppercase_hex_of_the_position() -> None:
    assert fmt.msg_id_of(0, 0) == "00000000000000000000"
    assert fmt.msg_id_of(3, 0x1234ABCD) == "0003000000001234ABCD"
    assert fmt.msg_id_of(1023, 2**63 - 1) == "03FF7FFFFFFFFFFFFFFF"
    assert fmt.op_id_of(3, 0x1234ABCD) == "op-0003-000000001234ABCD"
    # Fixed width: ids sort like positions within a partition (contract 3's tie-break).
    assert sorted(fmt.op_id_of(0, o) for o in (10, 9, 255, 16)) == [
        fmt.op_id_of(0, o) for o in (9, 10, 16, 255)
    ]


def test_store_times_are_rfc3339_utc_with_milliseconds() -> None:
    assert rfc3339(0) == "1970-01-01T00:00:00.000Z"
    assert rfc3339(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"


def test_a_half_record_carries_only_the_headers_given() -> None:
    request = SendRequest.model_validate({"producer_group": "g", "topic": "T"})
    record = half_record(request, "tx", 100, received_ms=5)
    assert record.key == b"tx"
    assert record.value == b""
    assert record.headers == [(fmt.PRODUCER_GROUP, b"g"), (fmt.TOPIC, b"T"), (fmt.BORN_AT, b"5")]


def test_keys_are_a_json_array_of_strings_the_ingest_can_parse() -> None:
    keys = ['quote"', "back\\slash", "ünï", "", "\x00nul"]
    request = SendRequest.model_validate({"producer_group": "g", "topic": "T", "keys": keys})
    headers = dict(half_record(request, "tx", 100, 0).headers)
    assert json.loads(headers[fmt.KEYS]) == keys


def test_the_body_limit_counts_decoded_bytes() -> None:
    exact = SendRequest.model_validate({"producer_group": "g", "topic": "T", "body": "é" * 50})
    assert len(half_record(exact, "tx", 100, 0).value) == 100
    over = SendRequest.model_validate({"producer_group": "g", "topic": "T", "body": "é" * 51})
    with pytest.raises(ApiError) as caught:
        half_record(over, "tx", 100, 0, field="messages[4].")
    assert (caught.value.status, caught.value.code) == (413, "too_large")
    assert caught.value.message.startswith("messages[4].body:")


def test_the_header_budget_is_rocketmqs_property_limit() -> None:
    def with_tags(size: int) -> SendRequest:
        return SendRequest.model_validate({"producer_group": "g", "topic": "T", "tags": "t" * size})

    budget = HEADER_BUDGET - len(fmt.TAGS)
    assert half_record(with_tags(budget), "tx", 10, 0)
    with pytest.raises(ApiError, match="at most 32767"):
        half_record(with_tags(budget + 1), "tx", 10, 0)


def test_an_operators_op_carries_who_and_why() -> None:
    request = OpRequest.model_validate(
        {"producer_group": "g", "operator": "alice", "reason": "paid by phone"}
    )
    record = op_record("tx", "COMMIT", request, received_ms=9)
    assert record.value == b""
    assert record.headers == [
        (fmt.PRODUCER_GROUP, b"g"), (fmt.OP, b"COMMIT"), (fmt.FROM_CHECK, b"false"),
        (fmt.OPERATOR, b"alice"), (fmt.REASON, b"paid by phone"), (fmt.BORN_AT, b"9"),
    ]  # fmt: skip


def test_error_messages_name_fields_and_survive_lone_surrogates() -> None:
    assert field_name(("body", "messages", 3, "topic")) == "messages[3].topic"
    assert field_name(("body",)) == "body"
    assert field_name(("query", "max")) == "max (query)"
    assert printable("a\ud800b") == "a\\ud800b"
    printable("a\ud800b").encode("utf-8")
