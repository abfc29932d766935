"""Event time that neither stalls (contract 7.4) nor runs ahead (contract 7.5), on real streams."""

from __future__ import annotations

import itertools
import time
from collections import Counter

import pytest
from pyspark.sql import SparkSession

from streams.query.decision_query import QUERY_NAME
from tests.harness import (
    FEW_SECONDS,
    TOPIC,
    Engine,
    Producer,
    count,
    table,
    wait_for,
    wait_past,
    warm,
)
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]


def test_a_quiet_system_checks_on_time(spark: SparkSession, make_config: ConfigFactory) -> None:
    timeout, interval = 4, 6
    config = make_config(
        transaction_timeout=f"{timeout}s",
        transaction_check_interval=f"{interval}s",
        transaction_check_max="3",
    )
    engine = Engine(spark, config)
    try:
        warm(engine)
        # Quiet from the start: the ticker has slowed to its idle interval (streams/
        # tick_pace.py), and the half's own batch must make it tick every second again.
        wait_for(lambda: not engine.pace.busy(), 60, "the ticker to rest")
        producer = Producer(config)
        producer.half("hanging")  # and no other traffic at all, only the heartbeats
        producer.close()
        wait_for(engine.pace.busy, 30, "the half's batch to wake the ticker")
        wait_for(
            lambda: count(config, "system/discarded") == 1,
            240,
            "the hanging transaction to be discarded",
        )
        # Each check's batch kept it ticking until the discard (the last timer).
        assert engine.pace.busy()
    finally:
        engine.stop()

    requests = sorted(
        table(spark, config, "system/check_requests").collect(), key=lambda r: r.check_number
    )
    assert [r.check_number for r in requests] == [1, 2, 3]
    first = (requests[0].requested_at - requests[0].prepared_at).total_seconds()
    assert timeout <= first <= 2 * timeout + FEW_SECONDS, first
    gaps = [
        (b.requested_at - a.requested_at).total_seconds() for a, b in itertools.pairwise(requests)
    ]
    # Check n+1 is due an interval after check n was sent (store time): never early, late
    # by the time the stream takes to see that far (its store-time lag).
    assert all(interval <= gap <= interval + timeout + FEW_SECONDS for gap in gaps), gaps
    (gone,) = table(spark, config, "system/discarded").collect()
    assert (gone.reason, gone.check_count) == ("check_max", 3)
    assert interval <= (gone.discarded_at - requests[-1].requested_at).total_seconds()


def assert_backlog_checks(checks: Counter[str]) -> None:
    """Each hanging half got one check; a slow commit may follow at most one; nothing else."""
    # A slow commit was stored 2 T after its half, after its first check was due (store
    # time): that one check may have gone out, never a second, and nothing else is checked.
    assert {tx: n for tx, n in checks.items() if not tx.startswith("slow-")} == {
        "hanging-0": 1,
        "hanging-1": 1,
        "hanging-2": 1,
    }
    assert all(n == 1 for tx, n in checks.items() if tx.startswith("slow-")), checks


def test_a_long_stop_with_a_backlog_drops_nothing(
    spark: SparkSession, make_config: ConfigFactory
) -> None:
    timeout, rounds = 3, 10
    config = make_config(transaction_timeout=f"{timeout}s", transaction_check_interval="10m")
    engine = Engine(spark, config)
    producer = Producer(config)
    try:
        warm(engine)
        engine.stop_coordinator()
        # 10 x T of traffic while the coordinator is down: Kafka keeps it, heartbeats included.
        for r in range(rounds):
            producer.half(f"commit-{r}")
            producer.op(f"commit-{r}", "COMMIT")
            producer.half(f"rollback-{r}")
            producer.op(f"rollback-{r}", "ROLLBACK")
            producer.op(f"first-{r}", "COMMIT")  # the op before its half
            producer.half(f"first-{r}")
            producer.half(f"slow-{r}")  # committed 2 T later: outside the join window
            if r >= 2:
                producer.op(f"slow-{r - 2}", "COMMIT")
            if r < 3:
                producer.half(f"hanging-{r}")  # nobody ever answers
            producer.flush()
            time.sleep(timeout)
        for r in (rounds - 2, rounds - 1):
            producer.op(f"slow-{r}", "COMMIT")
        producer.flush()
        before = engine.progress.batches[QUERY_NAME]
        engine.start_coordinator()
        wait_for(
            lambda: (
                count(config, "system/transactions") >= 4 * rounds
                and count(config, "system/check_requests") >= 3
            ),
            300,
            "the backlog to be decided",
        )
        # A check wrongly sent for a missed interval or a decided half was due during the
        # stop: once the engine's event time is past now, every such check would show.
        wait_past(engine, time.time(), 240, "the end of the backlog")
    finally:
        producer.close()
        engine.stop()

    assert engine.progress.dropped_late(QUERY_NAME) == 0
    catch_up = [
        line
        for line in list(engine.progress.recent)
        if line["query"] == QUERY_NAME and line["rows"]
    ]
    assert engine.progress.batches[QUERY_NAME] > before and len(catch_up) >= 3, catch_up

    finals = {
        r.transaction_id: (r.state, r.reason)
        for r in table(spark, config, "system/transactions").collect()
    }
    expected: dict[str, tuple[str, str]] = {}
    for r in range(rounds):
        expected |= {f"{kind}-{r}": ("COMMITTED", "op") for kind in ("commit", "first", "slow")}
        expected[f"rollback-{r}"] = ("ROLLED_BACK", "op")
    assert finals == expected
    assert table(spark, config, "system/transactions").count() == len(expected)
    # RocketMQ: an old half with no op gets exactly one check (not one per missed interval).
    checks = Counter(
        r.transaction_id for r in table(spark, config, "system/check_requests").collect()
    )
    assert_backlog_checks(checks)
    verdicts = Counter(r.verdict for r in table(spark, config, "system/op_verdicts").collect())
    assert verdicts == {"APPLIED": 4 * rounds}, verdicts
    delivered = table(spark, config, f"topics/{TOPIC}").collect()
    assert sorted(r.transaction_id for r in delivered) == sorted(
        tx for tx, (state, _) in expected.items() if state == "COMMITTED"
    )
    by_queue = Counter(r.queue_id for r in delivered)
    offsets = {q: sorted(r.queue_offset for r in delivered if r.queue_id == q) for q in by_queue}
    assert all(v == list(range(len(v))) for v in offsets.values()), offsets
