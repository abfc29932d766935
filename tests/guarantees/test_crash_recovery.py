"""SPEC 7.1: kill -9 of the coordinator application and of the broker, under load, then restart.

One run of the real engine (`deploy/submit-coordinator`) against a broker of the test's own,
while a producer keeps sending a mix of transactions and a listener answers check requests.
The application is killed with SIGKILL (the whole process tree at once) at each failpoint
between the writes of a micro-batch (coordinator/failpoints.py), once at a random moment,
and the broker is killed once while the application runs. After a final clean run the
tables must show: every committed message exactly once, nothing rolled back visible, one
final state per transaction, dense queue offsets in commit order, no row written twice.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from kafka.errors import KafkaError
from pyspark.sql import SparkSession

from coordinator.config import Config, load_config
from coordinator.failpoints import OPTION, REACHED
from coordinator.local_stack.kafka_broker import BrokerSettings, KafkaBroker, free_port
from delta_tables.queue_offsets import next_offsets
from tests.app_process import AppProcess
from tests.conftest import unavailable
from tests.harness import Producer, Responder

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

TOPICS = ("OrderPaid", "OrderShipped")


def kind_of(tx: str) -> str:
    """Return what transaction `tx` does: 80% commit, 10% rollback, 5% op before its half,
    5% committed only when checked (the check listener answers from this too)."""
    n = int(tx.rsplit("-", 1)[1]) % 20
    return "commit" if n < 16 else "rollback" if n < 18 else "first" if n == 18 else "checked"


def answer(request: dict[str, Any]) -> str:
    """The check listener: answers from the transaction's kind, as an application would."""
    return "ROLLBACK" if kind_of(request["transaction_id"]) == "rollback" else "COMMIT"


#: Where the application dies, in order (name=N: the N-th pass of that failpoint).
FAILPOINTS = (
    "coordinator.after_topic_append=1",
    "ingest.after_half_messages=2",
    "coordinator.after_queue_offsets=1",
    "coordinator.after_check_requests=1",
)


class Load:
    """Sends transactions at a steady rate until stopped; remembers what was acknowledged."""

    def __init__(self, config: Config, rate: float) -> None:
        self.config, self.rate = config, rate
        self.sent: list[str] = []  # every transaction whose records were all acknowledged
        self._producer = Producer(config, retries=5, request_timeout_ms=10_000)
        self._stop = threading.Event()
        self._random = random.Random(7)
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._thread.start()

    def _send(self, tx: str) -> None:
        kind = kind_of(tx)
        topic = self._random.choice(TOPICS)
        queue_id = self._random.randrange(4)
        while True:  # the whole transaction again until acknowledged (the broker may be down)
            try:
                if kind == "first":
                    self._producer.op(tx, "COMMIT").get(30)
                futures = [self._producer.half(tx, topic=topic, queue_id=queue_id)]
                if kind in ("commit", "rollback"):
                    futures.append(self._producer.op(tx, kind.upper()))
                for future in futures:
                    future.get(30)
            except KafkaError:
                time.sleep(1)
                continue
            self.sent.append(tx)
            return

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(1 / self.rate):
            self._send(f"tx-{n:06d}")
            n += 1

    def stop(self) -> None:
        """Stop sending (the transaction in flight completes first)."""
        self._stop.set()
        self._thread.join(300)
        assert not self._thread.is_alive(), "the load could not finish a transaction"
        self._producer.close()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[KafkaBroker]:
    """A broker of this test's own (it gets killed), on fixed ports so restarts keep them."""
    settings = BrokerSettings(data_dir=tmp_path / "kafka", port=free_port(),
                              controller_port=free_port())  # fmt: skip
    own = KafkaBroker(settings)
    try:
        own.start()
    except Exception as exc:
        unavailable("Kafka", exc)
    try:
        yield own
    finally:
        own.stop()


def start_app(settings: dict[str, str], failpoint: str | None = None) -> AppProcess:
    app = AppProcess(settings, *([OPTION, failpoint] if failpoint else []))
    if not app.wait_for_line("txcoord coordinator running", 240):
        app.kill9()
        unavailable("spark-submit", RuntimeError(app.tail()))
    return app


@pytest.mark.timeout(2700)  # six application starts, each 30-90 s of JVM and Spark warm-up
def test_kill_minus_nine_anywhere_loses_and_duplicates_nothing(
    spark: SparkSession, broker: KafkaBroker, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    settings = {
        "warehouse": str(tmp_path / "warehouse"),
        "transaction_timeout": "4s",
        "transaction_check_interval": "6s",
        "kafka.bootstrap_servers": broker.bootstrap_servers,
        "kafka.half_topic": f"half-{suffix}",
        "kafka.op_topic": f"op-{suffix}",
        "kafka.check_topic": f"check-{suffix}",
        "kafka.partitions": "2",
        "streams.checkpoint_dir": str(tmp_path / "checkpoints"),
        "spark.shuffle_partitions": "2",
        "metrics.port": "0",
    }
    config = load_config(overrides=settings)
    app = start_app(settings)
    load = Load(config, rate=3)
    responder = Responder(config, answer)
    try:
        time.sleep(random.uniform(10, 20))
        app.kill9()  # at a random moment
        for point in FAILPOINTS:
            app = start_app(settings, point)
            name = point.split("=")[0]
            reached = app.wait_for_line(REACHED.format(name=name), 300)
            app.kill9()
            assert reached, f"failpoint {name} was never reached:\n{app.tail()}"
        app = start_app(settings)
        time.sleep(10)
        broker.kill()
        time.sleep(3)
        broker.start()
        time.sleep(10)
        load.stop()
        if app.process.poll() is not None:  # the broker's death may have stopped it: restart
            app = start_app(settings)
        sent = {tx: kind_of(tx) for tx in load.sent}
        expected_finals = len(sent)
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            finals = spark.read.format("delta").load(f"{config.warehouse}/system/transactions")
            if finals.select("transaction_id").distinct().count() >= expected_finals:
                break
            assert app.process.poll() is None, app.tail()
            time.sleep(3)
        time.sleep(5)  # anything wrongly emitted afterwards would show now
    finally:
        load.stop()
        responder.stop()
        code = app.terminate() if app.process.poll() is None else app.process.returncode
    assert code == 0, app.tail()
    verify(spark, config, sent)


def read(spark: SparkSession, config: Config, name: str) -> list[Any]:
    return spark.read.format("delta").load(f"{config.warehouse}/{name}").collect()


def verify(spark: SparkSession, config: Config, sent: dict[str, str]) -> None:
    """Check every exactly-once invariant on the tables the runs left behind."""
    committed = {tx for tx, kind in sent.items() if kind != "rollback"}
    finals = read(spark, config, "system/transactions")
    once = Counter(r.transaction_id for r in finals)
    assert [tx for tx, n in once.items() if n > 1] == [], "a final state written twice"
    assert set(once) == set(sent), "a transaction without a final state"
    states = {r.transaction_id: r.state for r in finals}
    assert {tx for tx, s in states.items() if s == "COMMITTED"} == committed
    assert {tx for tx, s in states.items() if s == "ROLLED_BACK"} == set(sent) - committed

    delivered = [r for topic in TOPICS for r in read(spark, config, f"topics/{topic}")]
    visible = Counter(r.transaction_id for r in delivered)
    assert [tx for tx, n in visible.items() if n > 1] == [], "a message delivered twice"
    assert set(visible) == committed, "a committed message lost or a rolled-back one visible"
    for r in delivered:
        assert bytes(r.body) == f"body-{r.transaction_id}".encode()
    # Dense offsets per (topic, queue), in commit order: the order the coordinator decided
    # (batch), then op store time, then op id (SPEC 7.1 and 7.8).
    queues: dict[tuple[str, int], list[Any]] = {}
    for r in delivered:
        queues.setdefault((r.topic, r.queue_id), []).append(r)
    for key, messages in queues.items():
        by_offset = sorted(messages, key=lambda r: r.queue_offset)
        assert [r.queue_offset for r in by_offset] == list(range(len(messages))), key
        by_commit = sorted(messages, key=lambda r: (r.batch_id, r.committed_at, r.commit_op_id))
        assert by_offset == by_commit, key
    table = spark.read.format("delta").load(f"{config.warehouse}/system/queue_offsets")
    offsets = {(r.topic, r.queue_id): r.next_offset for r in next_offsets(table).collect()}
    assert offsets == {key: len(messages) for key, messages in queues.items()}

    # No row of any system table written twice by a replayed batch.
    halves = [r.msg_id for r in read(spark, config, "system/half_messages") if r.kind == "HALF"]
    assert len(halves) == len(set(halves)), "an ingress record landed twice"
    checks = Counter((r.transaction_id, r.check_number)
                     for r in read(spark, config, "system/check_requests"))  # fmt: skip
    assert [k for k, n in checks.items() if n > 1] == [], "a check request recorded twice"
    verdicts = Counter(r.op_id for r in read(spark, config, "system/op_verdicts"))
    assert [k for k, n in verdicts.items() if n > 1] == [], "an op judged twice"

    # The independent reader agrees.
    arrow = [tx for topic in TOPICS
             for tx in DeltaTable(f"{config.warehouse}/topics/{topic}").to_pyarrow_table()
             .column("transaction_id").to_pylist()]  # fmt: skip
    assert sorted(arrow) == sorted(committed)
