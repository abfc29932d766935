"""The coordinator's state moves to another number of partitions and nothing changes (real Spark).

Transactions in every situation (decided, rolled back, live and checked, immune, answered
UNKNOWN) are held by a checkpoint of 2 partitions; `txcoord state rebuild` moves them to 3,
then to 1, while records keep arriving between the rebuilds. After each, the engine goes on
as if nothing happened: live transactions keep their check counts (the next check number
follows the last, at most one repeated), late ops are judged against the decisions made
before, and every committed message is delivered exactly once, its queue offsets dense.
"""

from __future__ import annotations

import itertools
import shutil
from collections import Counter, defaultdict
from dataclasses import replace

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError
from streams.checkpoint.checkpoint_files import LocalFiles
from streams.checkpoint.generations import active_facts
from streams.state.rebuild import rebuild
from tests.harness import TOPIC, Engine, Producer, rows, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

GROUPS = {
    "committed": 8,  # committed before the first rebuild: late ops are judged against it
    "rolled": 6,  # rolled back before it
    "live": 8,  # never answered until the end: checked across both rebuilds
    "immune": 4,  # check immunity longer than the test: never checked
    "unknown": 6,  # answered UNKNOWN: live, checked
}


#: Checks every 3 s, never given up, decisions remembered for the whole test.
TIMING = {
    "transaction_timeout": "3s",
    "transaction_check_interval": "3s",
    "transaction_check_max": "1000",
    "streams.trigger_interval": "1s",
    "streams.tick_interval": "1s",
    "streams.resolved_retention": "1h",
}


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(**TIMING)


def with_partitions(config: Config, partitions: int) -> Config:
    return replace(config, spark=replace(config.spark, shuffle_partitions=partitions))


def ids(kind: str) -> list[str]:
    return [f"{kind}-{n}" for n in range(GROUPS[kind])]


def checks(spark: SparkSession, config: Config) -> dict[str, list[int]]:
    """Return each transaction's check numbers, in the order they were requested."""
    found: dict[str, list[int]] = defaultdict(list)
    requested = rows(config, "system/check_requests")
    for row in sorted(requested, key=lambda r: (r.requested_at, r.check_number)):
        found[row.transaction_id].append(row.check_number)
    return found


def verdicts(spark: SparkSession, config: Config) -> Counter[tuple[str, str, str]]:
    found = rows(config, "system/op_verdicts")
    return Counter((r.transaction_id.split("-")[0], r.op, r.verdict) for r in found)


def checked_at_least(spark: SparkSession, config: Config, times: int) -> bool:
    held = checks(spark, config)
    return all(len(held.get(tx, [])) >= times for tx in ids("live") + ids("unknown"))


def first_phase(spark: SparkSession, config: Config, producer: Producer) -> None:
    """Every kind of transaction, held by a checkpoint of 2 partitions; live ones checked."""
    engine = Engine(spark, config)
    try:
        for kind in GROUPS:
            for tx in ids(kind):
                producer.half(tx, immunity="3600" if kind == "immune" else None)
        for tx in ids("committed"):
            producer.op(tx, "COMMIT")
        for tx in ids("rolled"):
            producer.op(tx, "ROLLBACK")
        for tx in ids("unknown"):
            producer.op(tx, "UNKNOWN")
        producer.flush()
        wait_for(lambda: checked_at_least(spark, config, 1), 120, "a first check of each")
    finally:
        engine.stop()


def late_ops_phase(spark: SparkSession, config: Config, producer: Producer) -> None:
    """Checks go on; late ops are judged against decisions made before the rebuild."""
    engine = Engine(spark, config)
    try:
        before = checks(spark, config)
        wait_for(
            lambda: checked_at_least(spark, config, max(map(len, before.values())) + 1),
            120,
            "checks after the rebuild",
        )
        for tx in ids("committed"):
            producer.op(tx, "ROLLBACK")  # conflicting, late: judged against the commit
        for tx in ids("rolled"):
            producer.op(tx, "ROLLBACK")  # the same decision again
        producer.flush()
        wait_for(
            lambda: verdicts(spark, config)["rolled", "ROLLBACK", "DUPLICATE"] == GROUPS["rolled"],
            120,
            "the late ops to be judged",
        )
    finally:
        engine.stop()


def last_phase(spark: SparkSession, config: Config, producer: Producer) -> None:
    """The live transactions commit; a late op replayed is judged once."""
    engine = Engine(spark, config)
    try:
        for tx in ids("live") + ids("unknown"):
            producer.op(tx, "COMMIT")
        producer.flush()
        wait_for(
            lambda: (
                verdicts(spark, config)["live", "COMMIT", "APPLIED"] == GROUPS["live"]
                and verdicts(spark, config)["unknown", "COMMIT", "APPLIED"] == GROUPS["unknown"]
            ),
            120,
            "the live transactions to commit",
        )
    finally:
        engine.stop()


def assert_as_without_rebuilds(spark: SparkSession, config: Config) -> None:
    """Every transaction ended as it would have without a rebuild, once, in order."""
    held = checks(spark, config)
    assert not set(held) & set(ids("immune") + ids("committed") + ids("rolled"))
    for tx in ids("live") + ids("unknown"):
        numbers = held[tx]
        assert len(numbers) >= 2, (tx, numbers)
        # Counted on across the rebuilds: never back to 1, a number repeated at most once
        # per rebuild (a check due while the state moved may be sent again).
        steps = [b - a for a, b in itertools.pairwise(numbers)]
        assert numbers[0] == 1 and all(step in (0, 1) for step in steps), (tx, numbers)
        assert steps.count(0) <= REBUILDS, (tx, numbers)

    judged = verdicts(spark, config)
    assert judged["committed", "ROLLBACK", "CONFLICT"] == GROUPS["committed"]
    assert judged["rolled", "ROLLBACK", "DUPLICATE"] == GROUPS["rolled"]
    finals = Counter(
        r.transaction_id for r in table(spark, config, "system/transactions").collect()
    )
    assert all(n == 1 for n in finals.values()), finals
    decided = ("committed", "rolled", "live", "unknown")
    assert len(finals) == sum(GROUPS[kind] for kind in decided)

    delivered = table(spark, config, f"topics/{TOPIC}").collect()
    committed = ids("committed") + ids("live") + ids("unknown")
    assert sorted(r.transaction_id for r in delivered) == sorted(committed)  # once each
    by_queue: dict[int, list[int]] = defaultdict(list)
    for row in delivered:
        by_queue[row.queue_id].append(row.queue_offset)
    for offsets in by_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))  # dense


#: Rebuilds in the test: 2 -> 3 and 3 -> 1 from the checkpoint, then from the warehouse.
REBUILDS = 3


def test_rebuilds_keep_every_transaction_as_it_was(spark: SparkSession, config: Config) -> None:
    files = LocalFiles(config.streams.checkpoint_dir)
    producer = Producer(config)
    try:
        first_phase(spark, config, producer)
        assert active_facts(files).shuffle_partitions == 2
        moved = rebuild(spark, config, 3)
        assert moved.transactions == sum(GROUPS.values())
        assert (active_facts(files).name, active_facts(files).shuffle_partitions) == (
            "coordinator.1",
            3,
        )
        # The old number of partitions is refused now, with the command that moves them.
        with pytest.raises(ConfigurationError, match="txcoord state rebuild --partitions 2"):
            Engine(spark, config)

        late_ops_phase(spark, with_partitions(config, 3), producer)
        moved = rebuild(spark, with_partitions(config, 3), 1)
        assert moved.transactions == sum(GROUPS.values())
        assert active_facts(files).name == "coordinator.2"
        assert "coordinator" not in files.names()  # the generation before the previous: gone

        # The checkpoint is lost: the state comes back from the warehouse.
        shutil.rmtree(config.streams.checkpoint_dir)
        moved = rebuild(spark, config, 2, source="warehouse")
        assert moved.transactions == sum(GROUPS.values())
        assert active_facts(files).name == "coordinator.1"
        last_phase(spark, config, producer)
    finally:
        producer.close()
    assert_as_without_rebuilds(spark, config)
