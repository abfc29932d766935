"""The consumer's pure parts: tag expressions, which member reads which queue, one queue's
bookkeeping (what may be committed, what comes again), and what a receive does with a queue
whose table skips an offset."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.sdk.consumer import SimpleConsumer
from coordinator.sdk.consumer.allocation import allocate, owner
from coordinator.sdk.consumer.hand_out_limits import AnswerBudget
from coordinator.sdk.consumer.queue_progress import QueueProgress
from coordinator.sdk.consumer.tag_filter import TagFilter


def test_tag_expressions() -> None:
    every = TagFilter.parse("*")
    assert every.matches(None) and every.matches("A")
    assert TagFilter.parse(None).matches(None)
    some = TagFilter.parse(" A ||B ")
    assert some.expression == "A || B"
    assert some.matches("A") and some.matches("B")
    assert not some.matches("C") and not some.matches(None)  # untagged: only "*"
    for bad in ("A ||", "|| A", "A || * "):
        with pytest.raises(ValueError):
            TagFilter.parse(bad)


@given(
    st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=6, unique=True),
    st.sets(st.tuples(st.sampled_from(["T", "U"]), st.integers(0, 40)), max_size=60),
)
def test_every_queue_has_exactly_one_reader(
    members: list[str], queues: set[tuple[str, int]]
) -> None:
    shares = [allocate(queues, members, member) for member in members]
    assert sum(len(share) for share in shares) == len(queues)
    assert set().union(*shares) == queues
    assert allocate(queues, members, "not-a-member") == set()


@given(st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=6, unique=True))
def test_a_new_queue_moves_no_other(members: list[str]) -> None:
    before = {q: owner("T", q, members) for q in range(8)}
    after = {q: owner("T", q, members) for q in range(12)}
    assert all(after[q] == before[q] for q in before)


def test_committed_is_the_first_offset_not_acknowledged() -> None:
    q = QueueProgress(committed=5, end=10)
    assert q.behind() == 5 and q.lag() == 5
    for offset in (5, 6, 7):
        assert q.taken(offset, visible_again_at=100.0) == 1
    assert not q.ack(8)  # never handed out: cannot move anything
    assert q.ack(6) and q.committed == 5  # out of order: 5 still open
    assert not q.ack(6)
    assert q.ack(5) and q.committed == 7
    q.skipped(8)  # not subscribed: done without being handed out
    assert q.ack(7) and q.committed == 9
    assert q.lag() == 1 and not q.blocked()


def test_what_is_not_acknowledged_comes_again() -> None:
    q = QueueProgress(committed=0, end=3)
    q.taken(0, visible_again_at=10.0)
    q.taken(1, visible_again_at=20.0)
    assert q.blocked()
    assert q.due_again(5.0) == [] and q.due_again(15.0) == [0]
    assert q.taken(0, visible_again_at=30.0) == 2  # second attempt
    assert q.postpone(1, 40.0) and not q.postpone(2, 40.0)
    assert q.due_again(35.0) == [0]
    assert q.ack(0) and q.ack(1) and q.committed == 2 and not q.blocked()


def test_only_the_latest_delivery_settles_a_message() -> None:
    q = QueueProgress(committed=0, end=2)
    assert q.next_attempt(0) == 1 and q.taken(0, visible_again_at=10.0) == 1
    assert q.next_attempt(0) == 2 and q.taken(0, visible_again_at=20.0) == 2
    assert q.attempt_in_flight(0) == 2 and q.attempt_in_flight(1) is None
    assert not q.postpone(0, 30.0, attempt=1) and not q.ack(0, attempt=1)
    assert q.postpone(0, 30.0, attempt=2)
    assert q.ack(0, attempt=2) and q.committed == 1
    assert q.attempt_in_flight(0) is None and not q.ack(0, attempt=2)


class _TableWithAGap:
    """A queue's rows as a table with offset 1 missing would give them (offsets 0, 2, 3)."""

    def __init__(self) -> None:
        self.reads = 0

    def read(self, topic: str, queue_id: int, start: int, end: int) -> list[dict[str, Any]]:
        self.reads += 1
        # Before the mend a receive read the same rows again for ever, holding the lock.
        assert self.reads < 50, "the same rows read again and again"
        return [_row(n) for n in (0, 2, 3) if start <= n < end]


def _row(offset: int) -> dict[str, Any]:
    return {
        "topic": "T", "queue_id": 0, "queue_offset": offset, "msg_id": f"m{offset}",
        "transaction_id": f"tx{offset}", "producer_group": "g", "body": b"", "keys": None,
        "tags": None, "properties": None, "prepared_at": None,
        "committed_at": datetime(2026, 1, 1, tzinfo=UTC), "delivered_at": None,
    }  # fmt: skip


def test_an_offset_missing_from_the_table_stops_the_queue_there_not_the_receive(
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumer = SimpleConsumer("g", ["T"], bootstrap_servers="127.0.0.1:1", warehouse="unused")
    table = _TableWithAGap()
    consumer.reader = table  # type: ignore[assignment]
    consumer._owned[("T", 0)] = QueueProgress(committed=0, end=4)
    consumer._leases[("T", 0)] = 1
    with caplog.at_level(logging.WARNING, logger="coordinator.sdk.consumer"):
        first = consumer._take(AnswerBudget(16, None, None))
        again = consumer._take(AnswerBudget(16, None, None))
    assert [m.queue_offset for m in first] == [0] and again == []
    assert consumer._owned[("T", 0)].fetched == 1  # offset 1 is read for again at each receive
    assert table.reads == 3
    gaps = [r.getMessage() for r in caplog.records if "no row at offset 1" in r.getMessage()]
    assert len(gaps) == 1, caplog.text  # warned once, not at every receive
