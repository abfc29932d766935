"""topic_limits.py: new topics past max_topics or max_topics_per_group are refused, counted
with what the warehouse knows and what this ingress let in since (pure: a fake warehouse)."""

from __future__ import annotations

import pytest

from coordinator.core.config import load_config
from coordinator.rest.errors import ApiError
from coordinator.rest.topic_limits import LOCAL_SECONDS, REFRESH_SECONDS, TopicLimits


class Warehouse:
    """What `known_topics` would read, and how often it was read."""

    def __init__(self, known: dict[str, str | None]) -> None:
        self.known = known
        self.reads = 0

    def __call__(self, warehouse: str) -> dict[str, str | None]:
        self.reads += 1
        return dict(self.known)


def limits(warehouse: Warehouse, now: list[float], **settings: str) -> TopicLimits:
    config = load_config(overrides={"max_topics": "4", "max_topics_per_group": "2", **settings})
    return TopicLimits(config, read=warehouse, clock=lambda: now[0])


def refused(limits: TopicLimits, group: str, topic: str) -> str:
    with pytest.raises(ApiError) as raised:
        limits.admit([("", group, topic)])
    assert (raised.value.status, raised.value.code) == (403, "topic_limit")
    return raised.value.message


def test_a_group_and_the_warehouse_bring_in_at_most_their_topics() -> None:
    now = [0.0]
    warehouse = Warehouse({"Old": None, "A": "g1"})
    topics = limits(warehouse, now)
    topics.admit([("", "g1", "B")])  # g1's second
    assert "max_topics_per_group (2)" in refused(topics, "g1", "C")
    topics.admit([("", "g1", "A"), ("", "g1", "B"), ("", "g2", "Old")])  # known: always
    topics.admit([("", "g2", "D")])  # the warehouse's fourth (Old counts, its group unknown)
    assert "max_topics (4)" in refused(topics, "g3", "E")


def test_a_batch_is_let_in_whole_or_not_at_all() -> None:
    now = [0.0]
    topics = limits(Warehouse({}), now)
    with pytest.raises(ApiError, match=r"messages\[2\]\.topic: 'C'"):
        topics.admit([("messages[0].", "g1", "A"), ("messages[1].", "g1", "B"),
                      ("messages[2].", "g1", "C")])  # fmt: skip
    topics.admit([("", "g1", "A"), ("", "g1", "A"), ("", "g1", "B")])  # none counted before


def test_the_warehouse_is_read_at_most_once_a_second_and_takes_over_what_was_let_in() -> None:
    now = [0.0]
    warehouse = Warehouse({})
    topics = limits(warehouse, now)
    topics.admit([("", "g1", "A")])
    topics.admit([("", "g1", "A")])  # known here: no read
    topics.admit([("", "g2", "B")])
    assert warehouse.reads == 1
    # The coordinator recorded A (for g1) and a topic of another ingress, C.
    warehouse.known = {"A": "g1", "C": "g3"}
    now[0] += REFRESH_SECONDS
    topics.admit([("", "g2", "D")])
    assert warehouse.reads == 2
    assert "max_topics (4)" in refused(topics, "g4", "E")  # A, C, and B and D let in here
    # What this ingress let in and the warehouse never recorded counts for LOCAL_SECONDS.
    now[0] += LOCAL_SECONDS
    topics.admit([("", "g4", "E")])


def test_no_limit_without_auto_create() -> None:
    now = [0.0]
    warehouse = Warehouse({})
    topics = limits(warehouse, now, auto_create_topic_enable="false", topics="A")
    topics.admit([("", "g1", f"T{n}") for n in range(5)])
    assert warehouse.reads == 0
