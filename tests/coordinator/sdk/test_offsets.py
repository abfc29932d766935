"""OffsetTracker: a partition's commit never passes a request that is not answered yet."""

from __future__ import annotations

from coordinator.sdk.offsets import OffsetTracker

P0 = ("checks", 0)
P1 = ("checks", 1)


def test_nothing_taken_nothing_to_commit() -> None:
    assert OffsetTracker().committable() == {}


def test_commit_stops_at_the_first_unfinished_offset() -> None:
    tracker = OffsetTracker()
    for offset in (10, 11, 12, 13):
        tracker.taken(P0, offset)
    tracker.done(P0, 10)
    tracker.done(P0, 12)  # answered out of order: 11 still running
    assert tracker.committable() == {P0: 11}
    tracker.done(P0, 11)
    assert tracker.committable() == {P0: 13}
    tracker.done(P0, 13)
    assert tracker.committable() == {P0: 14}


def test_a_position_is_offered_again_until_committed() -> None:
    tracker = OffsetTracker()
    tracker.taken(P0, 0)
    tracker.done(P0, 0)
    assert tracker.committable() == {P0: 1}
    assert tracker.committable() == {P0: 1}  # the commit failed: offer it again
    tracker.committed({P0: 1})
    assert tracker.committable() == {}


def test_nothing_done_yet_commits_the_first_taken_offset() -> None:
    tracker = OffsetTracker()
    tracker.taken(P0, 5)
    assert tracker.committable() == {P0: 5}


def test_partitions_are_independent() -> None:
    tracker = OffsetTracker()
    tracker.taken(P0, 0)
    tracker.taken(P1, 7)
    tracker.done(P1, 7)
    assert tracker.committable() == {P0: 0, P1: 8}


def test_a_redelivered_record_is_pending_again_until_acknowledged_again() -> None:
    tracker = OffsetTracker()
    for offset in (0, 1):
        tracker.taken(P0, offset)
        tracker.done(P0, offset)
    tracker.committed(tracker.committable())
    tracker.taken(P0, 0)  # the consumer went back to the last commit... or an older one
    back = tracker.committable()
    assert back == {P0: 0}
    tracker.committed(back)
    tracker.done(P0, 0)
    assert tracker.committable() == {P0: 2}


def test_retain_forgets_partitions_that_moved_and_late_acknowledgements_are_ignored() -> None:
    tracker = OffsetTracker()
    tracker.taken(P0, 3)
    tracker.taken(P1, 4)
    tracker.retain([P1])
    tracker.done(P0, 3)  # a worker finishing after the rebalance
    assert tracker.committable() == {P1: 4}
    assert tracker.pending() == 1
