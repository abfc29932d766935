"""The checkpoint is a cache of the warehouse (contract 7.11): a start without it derives the
state from the warehouse instead of reading Kafka again from its start.

Committed transactions delivered, never-answered ones being checked, live ones waiting for
their answer; the coordinator stopped and its checkpoint folder removed (the warehouse and
the broker kept); a start. Before, it read every ingress record again and delivered every
committed message a second time under new offsets. Now: every committed message once, the
live transactions answered after the restart delivered once, the never-answered ones
discarded at `transaction_check_max` (one check more at most), new transactions as usual.
"""

from __future__ import annotations

import shutil
from collections import Counter, defaultdict

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from tests.harness import TOPIC, Engine, Producer, rows, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

CHECK_MAX = 3
COMMITTED = [f"committed-{i}" for i in range(12)]
SILENT = [f"silent-{i}" for i in range(6)]  # never answered: discarded
#: Pending across the restart (a check immunity longer than the test: never checked, so a
#: slow restart cannot discard them first), committed after it.
LIVE = [f"live-{i}" for i in range(6)]
LATER = [f"later-{i}" for i in range(6)]  # sent after the restart


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="3s",
        transaction_check_max=str(CHECK_MAX),
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


def test_a_start_without_its_checkpoint_derives_the_state_and_doubles_nothing(
    spark: SparkSession, config: Config
) -> None:
    producer = Producer(config)
    try:
        engine = Engine(spark, config)
        try:
            for i, tx in enumerate(COMMITTED + SILENT + LIVE):
                producer.half(tx, queue_id=i % 4, immunity="3600" if tx in LIVE else None)
            producer.flush()
            for tx in COMMITTED:
                producer.op(tx, "COMMIT")
            producer.flush()
            wait_for(lambda: len(delivered(spark, config)) == len(COMMITTED), 120,
                     "the committed ones delivered")  # fmt: skip
            wait_for(lambda: all(checks(spark, config).get(tx) for tx in SILENT), 120,
                     "a first check of each silent one")  # fmt: skip
        finally:
            engine.stop()
        shutil.rmtree(config.streams.checkpoint_dir)

        engine = Engine(spark, config)
        try:
            for tx in LIVE:
                producer.op(tx, "COMMIT")
            for i, tx in enumerate(LATER):
                producer.half(tx, queue_id=i % 4)
            producer.flush()
            for tx in LATER:
                producer.op(tx, "COMMIT")
            producer.flush()
            everyone = sorted(COMMITTED + LIVE + LATER)
            wait_for(lambda: sorted(delivered(spark, config)) == everyone
                     and set(finals(spark, config)) >= set(SILENT), 180,
                     "every commit delivered and the silent ones discarded")  # fmt: skip
        finally:
            engine.stop()
    finally:
        producer.close()

    rows = delivered(spark, config)
    assert sorted(rows) == everyone, Counter(rows).most_common(3)  # each once
    offsets: dict[int, list[int]] = defaultdict(list)
    for row in table(spark, config, f"topics/{TOPIC}").orderBy("queue_offset").collect():
        offsets[row.queue_id].append(row.queue_offset)
    assert all(o == list(range(len(o))) for o in offsets.values()), offsets  # dense, no repeat
    ended = finals(spark, config)
    assert all(ended[tx] == ("DISCARDED", CHECK_MAX) for tx in SILENT), ended
    assert all(ended[tx] == ("COMMITTED", 0) for tx in COMMITTED + LIVE + LATER), ended
    asked = checks(spark, config)
    assert all(len(asked[tx]) <= CHECK_MAX + 1 for tx in SILENT), asked  # one again at most
    counted = Counter(
        r.transaction_id for r in table(spark, config, "system/transactions").collect()
    )
    assert max(counted.values()) == 1, counted.most_common(3)


def delivered(spark: SparkSession, config: Config) -> list[str]:
    """Return the transaction id of every row of the topic table (repeats included)."""
    try:
        found = rows(config, f"topics/{TOPIC}")
    except Exception:  # not created yet
        return []
    return [row.transaction_id for row in found]


def checks(spark: SparkSession, config: Config) -> dict[str, list[int]]:
    """Return each transaction's check numbers."""
    found: dict[str, list[int]] = defaultdict(list)
    for row in rows(config, "system/check_requests"):
        found[row.transaction_id].append(row.check_number)
    return found


def finals(spark: SparkSession, config: Config) -> dict[str, tuple[str, int]]:
    """Return each decided transaction's final state and check count."""
    found = rows(config, "system/transactions")
    return {row.transaction_id: (row.state, row.check_count) for row in found}
