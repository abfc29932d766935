"""A batch larger than the driver takes from one Spark job is collected in slices.

The coordinator brings each batch's rows back into the driver as Arrow (one job). Spark
refuses a job whose results exceed `spark.driver.maxResultSize`: a backlog of big messages
read in one batch would fail it on every retry. Here the limit is lowered to 2 MiB (set on
the running SparkContext: each job reads it when it starts) and a backlog of 8 MiB of bodies
waits in Kafka when the engine starts. Every message must land, commit and be delivered
exactly once, and the writer must say it sliced the batch.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.protocol.ingress import HEADER_ALLOWANCE_BYTES
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from tests.harness import TOPIC, Engine, Producer, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

LIMIT_KEY = "spark.driver.maxResultSize"
LIMIT = 2 * 2**20
BODY_BYTES = 512 * 1024
TRANSACTIONS = 16


@contextlib.contextmanager
def lowered_result_limit(spark: SparkSession) -> Iterator[None]:
    """Lower the driver's result limit of every job started meanwhile; restore it after."""
    conf = spark.sparkContext._jsc.sc().conf()
    previous = conf.get(LIMIT_KEY, "1g")
    conf.set(LIMIT_KEY, str(LIMIT))
    try:
        yield
    finally:
        conf.set(LIMIT_KEY, previous)


def test_a_backlog_larger_than_the_drivers_result_limit_is_delivered_once(
    spark: SparkSession,
    make_config: ConfigFactory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    config: Config = make_config(transaction_timeout="120s", **{"streams.trigger_interval": "1s"})
    bodies = {f"big-{i:02d}": os.urandom(BODY_BYTES) for i in range(TRANSACTIONS)}
    # The premise: the halves alone are several times the limit (their deliveries as much).
    assert sum(map(len, bodies.values())) >= 4 * LIMIT
    ensure_ingress_topics(config)
    producer = Producer(config, max_request_size=config.max_message_size + HEADER_ALLOWANCE_BYTES)
    try:
        for tx, body in bodies.items():
            producer.half(tx, body=body)
            producer.op(tx, "COMMIT")
        producer.flush()
    finally:
        producer.close()

    with (
        lowered_result_limit(spark),
        caplog.at_level(logging.WARNING, "streams.writes.batch_collect"),
    ):
        engine = Engine(spark, config)
        try:

            def all_committed() -> bool:
                finals = table(spark, config, "system/transactions").select("transaction_id")
                return finals.count() >= TRANSACTIONS

            wait_for(all_committed, 300, "every big transaction to be decided")
        finally:
            engine.stop()
    sliced = [r.getMessage() for r in caplog.records if "slices" in r.getMessage()]
    assert sliced, "the backlog was not collected in slices"

    finals = table(spark, config, "system/transactions").select("transaction_id", "state")
    assert sorted((r.transaction_id, r.state) for r in finals.collect()) == [
        (tx, "COMMITTED") for tx in sorted(bodies)
    ]
    delivered = table(spark, config, f"topics/{TOPIC}").collect()
    assert sorted((r.transaction_id, bytes(r.body)) for r in delivered) == sorted(bodies.items())
    # Dense offsets in each queue, each message once.
    by_queue: dict[int, list[int]] = {}
    for r in delivered:
        by_queue.setdefault(r.queue_id, []).append(r.queue_offset)
    assert all(sorted(offsets) == list(range(len(offsets))) for offsets in by_queue.values())
    halves = table(spark, config, "system/half_messages").where("transaction_id LIKE 'big-%'")
    landed = halves.select("transaction_id", "body").collect()
    assert sorted((r.transaction_id, bytes(r.body)) for r in landed) == sorted(bodies.items())
