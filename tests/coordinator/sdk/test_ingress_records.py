"""The SDK writes exactly the ingress format of coordinator/protocol/ingress.py
(coordinator/protocol/records.py)."""

from __future__ import annotations

import pytest

from coordinator.protocol import ingress as fmt
from coordinator.protocol.ingress import msg_id_of, op_id_of
from coordinator.protocol.records import op_headers
from coordinator.sdk import Message


def test_ids_follow_the_ingest_derivation() -> None:
    assert msg_id_of(1, 42) == "0001000000000000002A"
    assert op_id_of(10, 255) == "op-000A-00000000000000FF"


def test_a_full_half_has_every_header_once() -> None:
    msg = Message(
        topic="OrderPaid",
        body=b"b",
        keys=["o-1", "é"],
        tags="paid",
        properties={"region": "eu", "x": ""},
        queue_id=3,
        check_immunity_seconds=60,
    )
    headers = msg.half_headers("orders", born_at_ms=1234)
    assert headers == [
        (fmt.PRODUCER_GROUP, b"orders"),
        (fmt.TOPIC, b"OrderPaid"),
        (fmt.QUEUE_ID, b"3"),
        (fmt.KEYS, b'["o-1", "\\u00e9"]'),
        (fmt.TAGS, b"paid"),
        (fmt.CHECK_IMMUNITY_SECONDS, b"60"),
        (fmt.BORN_AT, b"1234"),
        ("prop.region", b"eu"),
        ("prop.x", b""),
    ]
    names = [name for name, _ in headers]
    assert len(names) == len(set(names))


def test_a_minimal_half_leaves_optional_headers_out() -> None:
    headers = Message(topic="T").half_headers("orders", born_at_ms=1)
    assert [name for name, _ in headers] == [fmt.PRODUCER_GROUP, fmt.TOPIC, fmt.BORN_AT]


@pytest.mark.parametrize("op", fmt.OPS)
@pytest.mark.parametrize("from_check", [True, False])
def test_op_headers(op: str, from_check: bool) -> None:
    assert op_headers("orders", op, from_check, born_at_ms=7) == [
        (fmt.PRODUCER_GROUP, b"orders"),
        (fmt.OP, op.encode()),
        (fmt.FROM_CHECK, b"true" if from_check else b"false"),
        (fmt.BORN_AT, b"7"),
    ]


def test_an_unknown_op_is_refused() -> None:
    with pytest.raises(ValueError, match="op must be one of"):
        op_headers("orders", "COMMIT_MESSAGE", False, 0)
