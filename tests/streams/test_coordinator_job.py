"""The coordinator end to end on real streams: RocketMQ's mod-5 scenario through Kafka."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from deltalake import DeltaTable
from kafka import KafkaConsumer, KafkaProducer
from pyspark.sql import SparkSession

from coordinator.config import Config
from delta_tables.registry import create_system_tables
from streams import ingress_format as fmt
from streams.coordinator_job import start_coordinator
from streams.ingest_job import start_ingest
from streams.ingress_topics import ensure_ingress_topics
from streams.ticker import Ticker
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

GROUP = "orders"
TOPIC = "OrderPaid"
#: RocketMQ's integration test: by index mod 5.
PLAN = ["commit", "rollback", "commit_when_checked", "rollback_when_checked", "unknown"]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="8s",
        transaction_check_max="5",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


class Stack:
    """Ingest + coordinator queries, the ticker, and a producer-side check responder."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        ensure_ingress_topics(config)
        create_system_tables(spark, config.warehouse)
        self.spark, self.config = spark, config
        self.ticker = Ticker(config.kafka.bootstrap_servers,
                             [config.kafka.half_topic, config.kafka.op_topic],
                             config.streams.tick_interval).start()  # fmt: skip
        self.ingest = start_ingest(spark, config)
        self.coordinator, self.writer = start_coordinator(spark, config)
        self.producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, acks="all")
        self._stop = threading.Event()
        self._responder = threading.Thread(target=self._respond, daemon=True)
        self._responder.start()

    def send_half(self, tx: str) -> None:
        headers = [(fmt.PRODUCER_GROUP, GROUP.encode()), (fmt.TOPIC, TOPIC.encode()),
                   (fmt.KEYS, json.dumps([tx]).encode())]  # fmt: skip
        self.producer.send(self.config.kafka.half_topic, key=tx.encode(),
                           value=f"body-{tx}".encode(), headers=headers)  # fmt: skip

    def send_op(self, tx: str, op: str, from_check: bool = False) -> None:
        headers = [(fmt.PRODUCER_GROUP, GROUP.encode()), (fmt.OP, op.encode()),
                   (fmt.FROM_CHECK, b"true" if from_check else b"false")]  # fmt: skip
        self.producer.send(self.config.kafka.op_topic, key=tx.encode(), headers=headers)

    def _respond(self) -> None:
        consumer = KafkaConsumer(
            self.config.kafka.check_topic, bootstrap_servers=self.config.kafka.bootstrap_servers,
            group_id=GROUP, auto_offset_reset="earliest", consumer_timeout_ms=500,
        )  # fmt: skip
        try:
            while not self._stop.is_set():
                for record in consumer:
                    request = json.loads(record.value)
                    tx = request["transaction_id"]
                    plan = PLAN[int(tx.rsplit("-", 1)[1]) % 5]
                    answer = {"commit_when_checked": "COMMIT",
                              "rollback_when_checked": "ROLLBACK"}.get(plan, "UNKNOWN")  # fmt: skip
                    self.send_op(tx, answer, from_check=True)
                    self.producer.flush()
        finally:
            consumer.close()

    def stop(self) -> None:
        # A stream that failed while the test ran is a failure; an interruption caused by
        # stopping it mid-batch here is not (its batch is replayed on the next start).
        failures = [q.exception() for q in (self.coordinator, self.ingest) if not q.isActive]
        self._stop.set()
        self._responder.join(10)
        self.ticker.stop()
        for query in (self.coordinator, self.ingest):
            query.stop()
        self.writer.close()
        self.producer.close()
        assert failures == [], failures


@pytest.fixture
def stack(spark: SparkSession, config: Config) -> Iterator[Stack]:
    running = Stack(spark, config)
    try:
        yield running
    finally:
        running.stop()


def table(spark: SparkSession, config: Config, name: str):  # type: ignore[no-untyped-def]
    return spark.read.format("delta").load(f"{config.warehouse}/{name}")


def wait_for(condition, timeout: float = 480.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(1)
    raise AssertionError("timed out waiting for the coordinator")


def test_rocketmq_mod5_scenario(spark: SparkSession, config: Config, stack: Stack) -> None:
    txs = [f"tx-{i}" for i in range(20)]
    for tx in txs:
        stack.send_half(tx)
    stack.producer.flush()
    for i, tx in enumerate(txs):
        if PLAN[i % 5] == "commit":
            stack.send_op(tx, "COMMIT")
        elif PLAN[i % 5] == "rollback":
            stack.send_op(tx, "ROLLBACK")
    stack.producer.flush()

    wait_for(lambda: table(spark, config, "system/transactions").count() >= 20)
    time.sleep(3)  # anything wrongly emitted after the last decision would show now

    finals = {r.transaction_id: r for r in table(spark, config, "system/transactions").collect()}
    assert len(finals) == 20 and table(spark, config, "system/transactions").count() == 20
    for i, tx in enumerate(txs):
        expected = {"commit": ("COMMITTED", "op"), "rollback": ("ROLLED_BACK", "op"),
                    "commit_when_checked": ("COMMITTED", "check"),
                    "rollback_when_checked": ("ROLLED_BACK", "check"),
                    "unknown": ("DISCARDED", "check_max")}[PLAN[i % 5]]  # fmt: skip
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
    # until their answer is processed and never after it (SPEC 7.6). How many an answered one
    # gets depends on the answer's round trip against the check interval (machine speed).
    requests = table(spark, config, "system/check_requests").collect()
    checks = Counter(r.transaction_id for r in requests)
    for i, tx in enumerate(txs):
        plan = PLAN[i % 5]
        if plan == "unknown":
            assert checks[tx] == 5, (tx, checks[tx])
        elif plan.endswith("when_checked"):
            assert 1 <= checks[tx] < 5, (tx, checks[tx])
        else:
            assert checks[tx] == 0, (tx, checks[tx])
    late = [r.transaction_id for r in requests
            if r.requested_at > finals[r.transaction_id].resolved_at]  # fmt: skip
    assert late == []
    numbers = {tx: sorted(r.check_number for r in requests if r.transaction_id == tx)
               for tx in checks}  # fmt: skip
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
