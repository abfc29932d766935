"""A resolved transaction is remembered for `resolved_retention`, then forgotten (real Spark).

The stage keeps committed and rolled-back transactions in a state variable with an
event-time timer (streams/jvm/txcoord/TransactionProcessor.java): within the retention a
later op is judged against the decision; after it, the transaction is gone and the op is
an orphan that decides nothing (contract 3). Nothing is delivered twice either way.
"""

from __future__ import annotations

import time

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from tests.harness import TOPIC, Engine, Producer, rows, table, wait_for, wait_past
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: Long enough for an op sent once the decision is read back to be stored within it (the
#: decision's batch and a table read, a few seconds each under CI load), short enough for a test.
RETENTION_S = 20


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="2s",
        **{
            "streams.trigger_interval": "1s",
            "streams.tick_interval": "1s",
            "streams.resolved_retention": f"{RETENTION_S}s",
        },
    )


def verdicts(spark: SparkSession, config: Config) -> list[tuple[str, str]]:
    found = rows(config, "system/op_verdicts")
    return sorted((r.op, r.verdict) for r in found if r.transaction_id == "kept")


def test_a_resolved_transaction_is_judged_within_the_retention_and_forgotten_after(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    producer = Producer(config)
    try:
        producer.half("kept")
        producer.op("kept", "COMMIT")
        producer.flush()
        wait_for(lambda: len(verdicts(spark, config)) == 1, 120, "the commit to be applied")
        # Its batch started before the verdict could be read: forgotten by this, in store time.
        forgotten_by = time.time() + RETENTION_S

        producer.op("kept", "ROLLBACK")  # within the retention: judged against the commit
        producer.flush()
        wait_for(lambda: len(verdicts(spark, config)) == 2, 120, "the rollback to be judged")

        # Sent once the engine's event time is past the forgetting, not after a fixed wait: a
        # batch that read this op with an older watermark would judge it against the decision.
        wait_past(engine, forgotten_by, 180, "the end of the retention")
        producer.op("kept", "ROLLBACK")  # after it: forgotten, an orphan
        producer.flush()
        wait_for(lambda: len(verdicts(spark, config)) == 3, 180, "the late op to be an orphan")
    finally:
        producer.close()

    assert verdicts(spark, config) == [
        ("COMMIT", "APPLIED"),
        ("ROLLBACK", "CONFLICT"),
        ("ROLLBACK", "ORPHAN"),
    ]
    finals = [r.state for r in table(spark, config, "system/transactions").collect()]
    assert finals == ["COMMITTED"]
    delivered = [r.transaction_id for r in table(spark, config, f"topics/{TOPIC}").collect()]
    assert delivered == ["kept"]
