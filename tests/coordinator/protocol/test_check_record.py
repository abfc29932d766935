"""The check record's one codec (every reader decodes what the coordinator encodes); op kinds."""

from __future__ import annotations

import json
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.core.state_machine import PRODUCER_OPS
from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_record import OMITTED, CheckRecord
from coordinator.rest.models import OPS as REST_OPS
from coordinator.rest.models import CheckRequest as RestCheckRequest
from coordinator.sdk.message import CheckRequest
from streams.kafka_io.check_topic import check_record, slim_check_record

TEXT = st.text(max_size=20)
MILLIS = st.none() | st.integers(0, 2**53)
RECORDS = st.builds(
    CheckRecord,
    transaction_id=TEXT,
    msg_id=TEXT,
    producer_group=TEXT,
    topic=TEXT,
    queue_id=st.none() | st.integers(0, fmt.MAX_QUEUE_ID),
    body=st.binary(max_size=64),
    keys=st.lists(TEXT, max_size=3).map(tuple),
    tags=st.none() | TEXT,
    properties=st.dictionaries(TEXT, TEXT, max_size=3),
    check_number=st.integers(0, 100),
    prepared_at_ms=MILLIS,
    requested_at_ms=MILLIS,
    producer_instance=st.none() | st.from_regex(fmt.PRODUCER_INSTANCE_PATTERN, fullmatch=True),
)


# No time limit per example, nor on generating them: a loaded machine's pause is not a slow
# codec (Hypothesis' defaults, 200 ms an example, fail such a pause as "unreliable timing").
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=RECORDS, slim=st.booleans())
def test_decode_inverts_encode(record: CheckRecord, slim: bool) -> None:
    if slim:
        record = record.slim("too large", message_in="system/check_requests")
    key, value, headers = record.encode()
    assert key == record.transaction_id.encode()
    expected = [(fmt.PRODUCER_GROUP, record.producer_group.encode())]
    if record.producer_instance is not None:  # a slim record keeps it too
        expected.append((fmt.PRODUCER_INSTANCE, record.producer_instance.encode()))
    assert headers == expected
    assert CheckRecord.decode(value) == record


def _row(**changes: Any) -> dict[str, Any]:
    row = {
        "transaction_id": "tx-1",
        "msg_id": "0001000000000000000A",
        "producer_group": "g",
        "topic": "OrderPaid",
        "queue_id": 2,
        "body": b"\x00body",
        "keys": ["o-1"],
        "tags": "paid",
        "properties": {"a": "b"},
        "check_number": 3,
        "prepared_ms": 1000,
        "at_ms": 2000,
    }
    return row | changes


def test_the_writer_the_sdk_and_the_rest_read_the_same_record() -> None:
    _, value, _ = check_record(_row())
    request = CheckRequest.from_json(value, source=("checks", 0, 7))
    assert request.to_value() == json.loads(value)  # the SDK's request is the decoded record
    assert request.source == ("checks", 0, 7)
    assert (request.body, request.keys, request.check_number) == (b"\x00body", ("o-1",), 3)
    rest = RestCheckRequest.model_validate(CheckRecord.decode(value).to_value())
    assert rest.model_dump() == json.loads(value)  # the long poll returns the record as written


def test_a_slim_record_says_what_it_left_out() -> None:
    _, value, _ = slim_check_record(_row(), "the check record is too large")
    decoded = CheckRecord.decode(value)
    assert (decoded.body, decoded.keys, decoded.properties) == (b"", (), {})
    assert (decoded.omitted, decoded.body_size) == (OMITTED, 5)
    assert decoded.message_in == "system/check_requests"
    assert json.loads(value)["omitted_reason"] == "the check record is too large"


def test_the_op_kinds_are_the_state_machines_producer_events() -> None:
    assert tuple(event.value for event in PRODUCER_OPS) == fmt.OPS
    assert fmt.OPERATOR_OPS == ("RESUME",)
    assert get_args(REST_OPS) == fmt.OPS  # the REST's Literal spells out the same kinds


def test_the_check_names_the_instance_that_sent_the_half_even_slim() -> None:
    properties = {"a": "b", fmt.PRODUCER_INSTANCE_PROPERTY: "host-7"}
    _, value, headers = check_record(_row(properties=properties))
    assert CheckRecord.decode(value).producer_instance == "host-7"
    assert (fmt.PRODUCER_INSTANCE, b"host-7") in headers
    _, value, headers = slim_check_record(_row(properties=properties), "too large")
    slim = CheckRecord.decode(value)
    assert (slim.properties, slim.producer_instance) == ({}, "host-7")
    assert (fmt.PRODUCER_INSTANCE, b"host-7") in headers
    # The SDK's listener sees the property; the message it rebuilds leaves it to the producer.
    request = CheckRequest.from_json(check_record(_row(properties=properties))[1])
    assert request.properties == properties
    assert request.message.properties == {"a": "b"}


def test_an_instance_that_is_not_an_id_routes_nowhere() -> None:
    properties = {fmt.PRODUCER_INSTANCE_PROPERTY: "a b\n"}
    _, value, headers = check_record(_row(properties=properties))
    assert CheckRecord.decode(value).producer_instance is None
    assert fmt.PRODUCER_INSTANCE not in dict(headers)
