"""The tally: the tables' totals before a start add to what this process's batches counted."""

from __future__ import annotations

from collections import Counter

from streams.tally import FINISH_BUCKETS_S, Counts, Tally


def test_totals_counted_after_the_first_batches_add_to_them() -> None:
    tally = Tally()
    # A batch of this process, counted before the tables' totals are known.
    tally.add(halves=2, committed=1, checks_sent=1)
    tally.add_by_topic(halves={"OrderPaid": 2}, finals={"OrderPaid": 1})
    tally.observe_finishes({0: 1}, 0.4)
    before = Counts(
        halves=10, ops=9, quarantined=1, committed=6, rolled_back=2, discarded=1,
        checks_sent=4, first_checks=3, finals_after_check=2,
        halves_by_topic=Counter({"OrderPaid": 7, "OrderShipped": 3}),
        finals_by_topic=Counter({"OrderPaid": 9}),
        finish_buckets=(0, 2) + (0,) * (len(FINISH_BUCKETS_S) - 1),
        finish_seconds_total=1.5,
    )  # fmt: skip
    tally.add_counts(before)
    c = tally.snapshot()
    assert (c.halves, c.ops, c.quarantined, c.committed, c.rolled_back, c.discarded) == (
        12, 9, 1, 7, 2, 1,
    )  # fmt: skip
    assert (c.checks_sent, c.first_checks, c.finals_after_check) == (5, 3, 2)
    assert c.halves_by_topic == {"OrderPaid": 9, "OrderShipped": 3}
    assert c.finals_by_topic == {"OrderPaid": 10}
    assert c.finish_buckets[:2] == (1, 2) and sum(c.finish_buckets) == 3
    assert c.finish_seconds_total == 1.9
    assert c.pending == 12 - 10
    assert before.halves == 10 and before.halves_by_topic["OrderPaid"] == 7  # not aliased
