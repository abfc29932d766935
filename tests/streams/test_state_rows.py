"""The coordinator's stage counts the rows it keeps (streams/state_rows.py), real Spark.

RocksDB's own count is off (coordinator/spark_session.py); the stage reports each task's net
change and the count starts from the checkpoint's state at each start. The truth it is
held to is Spark's state data source reading the same checkpoint.
"""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from core.config import Config
from streams.coordinator_job import QUERY_NAME, checkpoint_of
from streams.state_rows import STATE_VARIABLE, counted
from tests.harness import Engine, Producer, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(**{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"})


def stored(spark: SparkSession, config: Config) -> int:
    """Return the rows of the stage's state at the checkpoint's last committed batch."""
    reader = spark.read.format("statestore").option("stateVarName", STATE_VARIABLE)
    return reader.load(checkpoint_of(config)).count()


def rows(expected: int) -> bool:
    count = counted(QUERY_NAME)
    return count is not None and count.rows == expected


@pytest.mark.kafka
def test_the_count_follows_the_state_and_starts_again_from_the_checkpoint(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    producer = Producer(config)
    try:
        for tx in ("open-1", "open-2", "open-3", "decided"):
            producer.half(tx)
        producer.op("decided", "COMMIT")  # decided: kept to judge later ops (retention)
        producer.flush()
        # The count moves when a batch's rows are in; the checkpoint once it is committed.
        wait_for(lambda: rows(4) and stored(spark, config) == 4, 120, "four transactions kept")

        engine.stop_coordinator()
        engine.start_coordinator()  # a new count, from the checkpoint's state
        count = counted(QUERY_NAME)
        assert count is not None and count.rows == 4

        producer.op("open-1", "ROLLBACK")  # decided now, still kept
        producer.op("never-prepared", "COMMIT")  # an orphan op waits for its half: kept
        producer.flush()
        finals = table(spark, config, "system/transactions")
        wait_for(lambda: finals.count() == 2 and rows(5) and stored(spark, config) == 5, 120,
                 "the rollback and the orphan kept")  # fmt: skip
    finally:
        producer.close()


def test_a_task_run_again_replaces_its_figure_and_take_forgets_older_batches(
    spark: SparkSession,
) -> None:
    gateway, jvm = spark.sparkContext._gateway, spark.sparkContext._jvm
    assert gateway is not None and jvm is not None
    deltas = jvm.txcoord.StateRowDeltas()
    spark.sparkContext._jsc.sc().register(deltas, "test state rows")  # type: ignore[union-attr]

    def task(batch: int, partition: int, change: int) -> object:
        """Return what a task of `batch` on `partition` reports: its net change."""
        reported = deltas.copy()
        reported.reset()
        figure = gateway.new_array(jvm.long, 3)
        figure[0], figure[1], figure[2] = batch, partition, change
        reported.add(figure)
        return reported

    deltas.merge(task(7, 0, 3))
    deltas.merge(task(7, 1, -1))
    deltas.merge(task(7, 0, 3))  # the same task again, from the same state
    deltas.merge(task(8, 0, 5))
    assert deltas.take(7) == 2
    assert deltas.take(7) == 0  # taken: never counted twice
    assert deltas.take(8) == 5
    assert deltas.isZero()
