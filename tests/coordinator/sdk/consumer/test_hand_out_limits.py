"""How much a consumer hands out: one receive's budget, and what it holds unacknowledged
(coordinator/sdk/consumer/hand_out_limits.py). Pure: no Kafka, no warehouse."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from coordinator.sdk.consumer.hand_out_limits import (
    AnswerBudget,
    HeldMessages,
    message_size,
    row_size,
)
from coordinator.sdk.consumer.message_view import MessageView

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def row(offset: int, body: bytes, **extra: Any) -> dict[str, Any]:
    return {
        "topic": "T", "queue_id": 0, "queue_offset": offset, "msg_id": f"m{offset}",
        "transaction_id": f"tx{offset}", "producer_group": "g", "body": body, "keys": None,
        "tags": None, "properties": None, "prepared_at": None, "committed_at": NOW,
        "delivered_at": NOW, **extra,
    }  # fmt: skip


def view(offset: int, body: bytes) -> MessageView:
    return MessageView.of_row(row(offset, body), 1, 1)


def test_a_message_is_its_body_keys_tags_and_properties() -> None:
    whole = row(0, b"12345", keys=["ab", "é"], tags="t", properties=[("k", "vv")])
    assert row_size(whole) == 5 + 2 + 2 + 1 + 3
    assert message_size(MessageView.of_row(whole, 1, 1)) == row_size(whole)


def test_an_answer_stops_at_its_bytes_but_always_takes_the_first() -> None:
    budget = AnswerBudget(3, max_bytes=10)
    assert budget.add(view(0, b"x" * 50))  # alone over the budget: still handed out
    assert not budget.add(view(1, b"x"))
    budget = AnswerBudget(3, max_bytes=10)
    assert budget.add(view(0, b"x" * 4)) and budget.add(view(1, b"x" * 6))
    assert not budget.add(view(2, b"x"))  # 11 > 10
    counted = AnswerBudget(2, max_bytes=None)
    assert counted.add(view(0, b"x" * 10**6)) and counted.add(view(1, b"y"))
    assert counted.spent() and not counted.add(view(2, b"z"))
    measured = AnswerBudget(5, max_bytes=10, size_of=lambda m: 4)
    assert [measured.add(view(n, b"")) for n in range(4)] == [True, True, False, False]


def test_what_is_held_is_bounded_in_count_and_bytes() -> None:
    held = HeldMessages(max_messages=3, max_bytes=10)
    assert not held.full() and held.has_room(100)  # empty: one of any size fits
    held.keep(("T", 0, 0), row(0, b"x" * 100))
    assert held.full() and not held.has_room(1) and held.refused
    held.forget(("T", 0, 0))
    assert (held.count, held.bytes) == (0, 0)
    held.begin()
    for offset in range(3):
        assert held.has_room(3)
        held.keep(("T", 0, offset), row(offset, b"abc"))
    assert (held.count, held.bytes) == (3, 9) and held.full()
    held.forget(("T", 0, 1))
    held.begin()
    assert not held.full() and held.has_room(4) and not held.has_room(5)
    held.keep(("T", 0, 0), row(0, b"a"))  # the same message kept again: counted once
    assert (held.count, held.bytes) == (2, 4)
    assert held.row(("T", 0, 2)) is not None and held.row(("T", 0, 1)) is None
    unbounded = HeldMessages()
    for offset in range(1000):
        assert unbounded.has_room(10**6)
        unbounded.keep(("T", 0, offset), row(offset, b"x"))
    assert not unbounded.full()
    with pytest.raises(ValueError, match="max_unacked_messages"):
        HeldMessages(max_messages=0)
