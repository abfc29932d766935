"""The coordinator end to end on real streams: RocketMQ's mod-5 scenario through Kafka."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.runtime.table_counts import table_counts
from streams.progress.tally import Counts
from tests.harness import TOPIC, Engine, Producer, Responder, count, table, wait_for, wait_past
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: RocketMQ's integration test: by index mod 5.
PLAN = ["commit", "rollback", "commit_when_checked", "rollback_when_checked", "unknown"]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="5s",
        transaction_check_max="4",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


def plan_of(tx: str) -> str:
    return PLAN[int(tx.rsplit("-", 1)[1]) % 5]


def answer(request: dict[str, Any]) -> str:
    """The producer's check listener of RocketMQ's test."""
    plan = plan_of(request["transaction_id"])
    return {"commit_when_checked": "COMMIT", "rollback_when_checked": "ROLLBACK"}.get(
        plan, "UNKNOWN"
    )


@pytest.fixture
def responder(config: Config, engine: Engine) -> Iterator[Responder]:
    """The producers' check listener, answering while the engine runs (stopped before it)."""
    running = Responder(config, answer)
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.usefixtures("responder")
def test_rocketmq_mod5_scenario(spark: SparkSession, config: Config, engine: Engine) -> None:
    txs = [f"tx-{i}" for i in range(20)]
    producer = Producer(config)
    for tx in txs:
        producer.half(tx)
    producer.flush()
    for i, tx in enumerate(txs):
        if PLAN[i % 5] == "commit":
            producer.op(tx, "COMMIT")
        elif PLAN[i % 5] == "rollback":
            producer.op(tx, "ROLLBACK")
    producer.close()

    wait_for(lambda: count(config, "system/transactions") >= 20, 480, "20 final states")
    # A check wrongly sent after a decision (or after the discard) would be due within one
    # check interval of the last one: once the engine's event time is past that, it would show.
    due = time.time() + config.transaction_check_interval.total_seconds()
    wait_past(engine, due, 240, "one check interval after the last decision")

    finals = {r.transaction_id: r for r in table(spark, config, "system/transactions").collect()}
    assert len(finals) == 20 and table(spark, config, "system/transactions").count() == 20
    for i, tx in enumerate(txs):
        expected = {
            "commit": ("COMMITTED", "op"),
            "rollback": ("ROLLED_BACK", "op"),
            "commit_when_checked": ("COMMITTED", "check"),
            "rollback_when_checked": ("ROLLED_BACK", "check"),
            "unknown": ("DISCARDED", "check_max"),
        }[PLAN[i % 5]]
        assert (finals[tx].state, finals[tx].reason) == expected, (tx, finals[tx])

    # Every committed body exactly once, never a rolled-back or discarded one.
    delivered = table(spark, config, f"topics/{TOPIC}").collect()
    committed = sorted(tx for i, tx in enumerate(txs) if PLAN[i % 5].startswith("commit"))
    assert sorted(r.transaction_id for r in delivered) == committed
    assert all(bytes(r.body) == f"body-{r.transaction_id}".encode() for r in delivered)
    # Dense queue offsets per queue: 0..n-1.
    by_queue: dict[int, list[int]] = {}
    for r in delivered:
        by_queue.setdefault(r.queue_id, []).append(r.queue_offset)
    assert all(sorted(v) == list(range(len(v))) for v in by_queue.values()), by_queue

    # Checks: the unknown ones exactly check_max times, then discarded once; answered ones
    # until their answer is processed and never after it (contract 7.6: `late` below). How many an
    # answered one gets depends on the answer's round trip against the check interval (machine
    # speed): on a loaded machine an answer stored after the last check still decides.
    requests = table(spark, config, "system/check_requests").collect()
    checks = Counter(r.transaction_id for r in requests)
    check_max = config.transaction_check_max
    for i, tx in enumerate(txs):
        plan = PLAN[i % 5]
        if plan == "unknown":
            assert checks[tx] == check_max, (tx, checks[tx])
        elif plan.endswith("when_checked"):
            assert 1 <= checks[tx] <= check_max, (tx, checks[tx])
        else:
            assert checks[tx] == 0, (tx, checks[tx])
    late = [
        r.transaction_id for r in requests if r.requested_at > finals[r.transaction_id].resolved_at
    ]
    assert late == []
    numbers = {
        tx: sorted(r.check_number for r in requests if r.transaction_id == tx) for tx in checks
    }
    assert all(n == list(range(1, len(n) + 1)) for n in numbers.values()), numbers
    discarded = table(spark, config, "system/discarded").collect()
    assert sorted(r.transaction_id for r in discarded) == sorted(
        tx for i, tx in enumerate(txs) if PLAN[i % 5] == "unknown"
    )
    # UNKNOWN answers were recorded and had no effect.
    verdicts = Counter(
        (r.op, r.verdict) for r in table(spark, config, "system/op_verdicts").collect()
    )
    assert verdicts[("UNKNOWN", "NO_EFFECT")] >= 8
    assert verdicts[("COMMIT", "APPLIED")] == 8 and verdicts[("ROLLBACK", "APPLIED")] == 8

    # The independent reader agrees.
    arrow = DeltaTable(f"{config.warehouse}/topics/{TOPIC}").to_pyarrow_table()
    assert sorted(arrow.column("transaction_id").to_pylist()) == committed
    assert_a_restart_counts_the_tables(spark, config, engine)


def assert_a_restart_counts_the_tables(spark: SparkSession, config: Config, engine: Engine) -> None:
    """A restart's totals start from the tables' (Tally.seed at start)."""
    engine.stop()
    again = Engine(spark, config)
    try:
        assert totals(again.tally.snapshot()) == totals(table_counts(spark, config))
        restarted = again.tally.snapshot()
        assert (restarted.committed, restarted.rolled_back, restarted.discarded) == (8, 8, 4)
        assert restarted.halves == 20 and restarted.pending == 0
    finally:
        again.stop()


def totals(counts: Counts) -> tuple[Any, ...]:
    """Return the counts the tables imply (not the process's finish-latency histogram)."""
    return (
        counts.halves,
        counts.ops,
        counts.quarantined,
        counts.committed,
        counts.rolled_back,
        counts.discarded,
        counts.checks_sent,
        counts.first_checks,
        counts.finals_after_check,
        dict(counts.halves_by_topic),
        dict(counts.finals_by_topic),
    )
