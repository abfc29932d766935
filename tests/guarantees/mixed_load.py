"""The guarantee tests' shared workload, configuration and checks.

A mixed load of transactions (75% committed, 10% rolled back, 5% op before its half, 5%
committed only when checked, 5% never answered, so discarded after CHECK_MAX checks) plus a
few malformed records, sent at a steady rate by a producer that retries a transaction until
the broker acknowledges it; a check listener that answers from each transaction's kind; and
`verify`, which checks every exactly-once invariant on the tables a run left behind (every
acknowledged record landed once, one final state per transaction and the right one, every
committed message delivered once with dense queue offsets in commit order, nothing rolled
back or discarded visible). The crash test, the overlap test and the cluster test drive real
applications with it.

In the per-group layout (`[kafka] topics_per_group = true`, coordinator/core/topics.py) the
load's producer group writes its own half and op topics, malformed records included, and its
listener reads its own check topic (`as_group`); `Scenario` creates them before the first
start, so the engine's subscription pattern finds them at once.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from kafka.errors import KafkaError
from pyspark.sql import SparkSession

from coordinator.core.config import Config, load_config
from coordinator.protocol import ingress as fmt
from coordinator.protocol.deliveries import delta_rs_location
from delta_tables import half_messages, op_records
from delta_tables.queue_offsets import next_offsets
from streams.kafka_io.ingress_topics import ensure_group_topics
from tests.app_process import AppProcess
from tests.conftest import settings_under
from tests.guarantees.app_runs import AppRuns
from tests.harness import (
    GROUP,
    Producer,
    Responder,
    as_group,
    last_progress,
    rows,
    wait_for,
    watermark_past,
)

TOPICS = ("OrderPaid", "OrderShipped")
#: Checks before a never-answered transaction is discarded (small, so discards happen often).
CHECK_MAX = 3
#: In the per-group layout: the group a malformed op names on GROUP's own op topic.
INTRUDER = "intruder"


def kind_of(tx: str) -> str:
    """Return what transaction `tx` does: 75% commit, 5% never answered (discarded), 10%
    rollback, 5% op before its half, 5% committed only when checked (the check listener
    answers from this too)."""
    n = int(tx.rsplit("-", 1)[1]) % 20
    if n < 15:
        return "commit"
    return {15: "never", 16: "rollback", 17: "rollback", 18: "first"}.get(n, "checked")


def answer(request: dict[str, Any]) -> str | None:
    """The check listener: answers from the transaction's kind, as an application would."""
    kind = kind_of(request["transaction_id"])
    return None if kind == "never" else "ROLLBACK" if kind == "rollback" else "COMMIT"


class Load:
    """Sends transactions at a steady rate until stopped; remembers what was acknowledged."""

    def __init__(self, config: Config, rate: float, rng: random.Random) -> None:
        self.config, self.rate = config, rate
        self.sent: list[str] = []  # every transaction whose records were all acknowledged
        # (partition, offset) of every acknowledged record, whatever became of its transaction
        self.halves: set[tuple[int, int]] = set()
        self.ops: set[tuple[int, int]] = set()
        self.malformed: set[tuple[str, int, int]] = set()  # (topic, partition, offset)
        self._per_group = config.kafka.topics_per_group
        self._own = as_group(config)  # the topics GROUP writes, malformed records too
        self._producer = Producer(self._own, retries=5, request_timeout_ms=10_000)
        self._stop = threading.Event()
        self._random = rng
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)
        self._thread.start()

    def _acked(self, future: Any, into: set[Any], with_topic: bool = False) -> None:
        meta = future.get(30)
        into.add(
            (meta.topic, meta.partition, meta.offset)
            if with_topic
            else (meta.partition, meta.offset)
        )

    def _send(self, tx: str) -> None:
        kind = kind_of(tx)
        topic = self._random.choice(TOPICS)
        queue_id = self._random.randrange(4)
        while True:  # the whole transaction again until acknowledged (the broker may be down)
            try:
                if kind == "first":
                    self._acked(self._producer.op(tx, "COMMIT"), self.ops)
                half = self._producer.half(tx, topic=topic, queue_id=queue_id)
                op = self._producer.op(tx, kind.upper()) if kind in ("commit", "rollback") else None
                self._acked(half, self.halves)
                if op is not None:
                    self._acked(op, self.ops)
            except KafkaError:
                time.sleep(1)
                continue
            self.sent.append(tx)
            return

    def _send_malformed(self, n: int) -> None:
        """One record each ingress topic must quarantine: a half without headers, a bad op
        (in the per-group layout, a valid op naming another group on GROUP's own op topic)."""
        kafka, key, topics = self._producer.kafka, f"bad-{n}".encode(), self._own.kafka
        if n % 2:
            future = kafka.send(topics.half_topic, key=key, value=b"no headers")
        else:
            group, op = (INTRUDER, b"COMMIT") if self._per_group else (GROUP, b"MAYBE")
            headers = [(fmt.PRODUCER_GROUP, group.encode()), (fmt.OP, op)]
            future = kafka.send(topics.op_topic, key=key, headers=headers)
        with contextlib.suppress(KafkaError):  # not acknowledged: nothing to find
            self._acked(future, self.malformed, with_topic=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.wait(1 / self.rate):
            self._send(f"tx-{n:06d}")
            if n % 10 == 5:
                self._send_malformed(n // 10)
            n += 1

    def stop(self) -> None:
        """Stop sending (the transaction in flight completes first)."""
        self._stop.set()
        self._thread.join(300)
        assert not self._thread.is_alive(), "the load could not finish a transaction"
        self._producer.close()


def settings_of(bootstrap_servers: str, where: Path, **overrides: str) -> dict[str, str]:
    """Return the configuration of a test's coordinators: quick checks and discards, the
    warehouse and checkpoints under `where`, ingress topics of the test's own."""
    return settings_under(
        where,
        bootstrap_servers,
        transaction_timeout="4s",
        transaction_check_interval="4s",
        transaction_check_max=str(CHECK_MAX),
        **{"spark.shuffle_partitions": "2", **overrides},
    )


def alive(runs: AppRuns, app: AppProcess, when: str) -> AppProcess:
    """Return `app` if it runs, else a new start after its (acceptable) exit."""
    if app.process.poll() is None:
        return app
    runs.exited(app, when)
    return runs.start()


def drain(config: Config, runs: AppRuns, apps: list[AppProcess], sent: int) -> None:
    """Wait until every sent transaction has a final state and the watermark passed one
    check interval more (a wrong check would be due by then); restart after acceptable exits.

    The final states are counted with delta-rs each second (a Spark query took 1-2 s a look
    on a loaded host, and the loop waited 3 s between looks)."""
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if len(decided(config)) >= sent:
            break
        if (last := alive(runs, apps[-1], "while draining")) is not apps[-1]:
            apps.append(last)
        time.sleep(1)
    due = time.time() + config.transaction_check_interval.total_seconds()
    wait_for(
        lambda: watermark_past(last_progress(apps[-1].lines()), due),
        300,
        "the application's watermark to pass one check interval",
    )


def explain(
    config: Config,
    *,
    wrong: list[str],
    sent: dict[str, str],
    states: dict[str, str],
    responder: Responder,
) -> str:
    """Say, per transaction in the wrong final state, what its checks and answers did."""
    lines = [f"{len(wrong)} transaction(s) in the wrong final state"]
    checks = rows(config, "system/check_requests")
    ops = [r for r in rows(config, "system/op_records") if r.kind == op_records.KIND_OP]
    verdicts = {r.op_id: r.verdict for r in rows(config, "system/op_verdicts")}
    clock = "%H:%M:%S.%f"
    for tx in wrong[:8]:
        lines.append(f"{tx}: {sent[tx]} -> {states.get(tx)}")
        lines += [
            f"  check {r.check_number} requested {r.requested_at:{clock}} batch {r.batch_id}"
            for r in sorted(checks, key=lambda r: r.check_number)
            if r.transaction_id == tx
        ]
        got = sorted(n for (t, n), _ in responder.published_ms.items() if t == tx)
        answered = [op for t, op in responder.sent if t == tx]
        lines.append(f"  listener read checks {got}, answered {answered}")
        lines += [
            f"  op {r.op} from_check={r.from_check} stored {r.stored_at:{clock}} "
            f"-> {verdicts.get(r.op_id)}"
            for r in ops
            if r.transaction_id == tx
        ]
    lines.append(
        f"listener: {len(responder.requests)} checks read, "
        f"{len(responder.sent)} answered, errors: {responder.errors[:10]}"
    )
    return "\n".join(lines)


def verify_ingest(config: Config, load: Load) -> list[Any]:
    """Every acknowledged record landed in its table, none twice; return the op records."""
    halves = [r for r in rows(config, "system/half_messages") if r.kind == half_messages.KIND_HALF]
    assert twice([r.msg_id for r in halves]) == [], "a half landed twice"
    at = [(r.ingress_partition, r.ingress_offset) for r in halves]
    assert twice(at) == [], "an ingress record landed twice as a half"
    assert load.halves - set(at) == set(), "an acknowledged half lost"
    ops = [r for r in rows(config, "system/op_records") if r.kind == op_records.KIND_OP]
    assert twice([r.op_id for r in ops]) == [], "an op landed twice"
    at = [(r.ingress_partition, r.ingress_offset) for r in ops]
    assert twice(at) == [], "an ingress record landed twice as an op"
    assert load.ops - set(at) == set(), "an acknowledged op lost"
    refused = [
        (r.source_topic, r.source_partition, r.source_offset)
        for r in rows(config, "system/quarantine")
    ]
    assert twice(refused) == [], "a malformed record quarantined twice"
    assert load.malformed, "the load sent no malformed record"
    assert load.malformed - set(refused) == set(), "an acknowledged malformed record lost"

    return ops


def read(spark: SparkSession, config: Config, name: str) -> list[Any]:
    """Return every row of warehouse table `name`, read by Spark."""
    return spark.read.format("delta").load(f"{config.warehouse}/{name}").collect()


def decided(config: Config) -> set[str]:
    """Return the transactions with a final state in `system/transactions` (none yet if the
    table is not there yet)."""
    try:
        table = DeltaTable(delta_rs_location(f"{config.warehouse}/system/transactions"))
    except Exception:  # not created yet: the first batch has not run
        return set()
    return set(table.to_pyarrow_table(columns=["transaction_id"]).column(0).to_pylist())


def twice(keys: list[Any]) -> list[Any]:
    """Return the keys that occur more than once."""
    return sorted(key for key, n in Counter(keys).items() if n > 1)


def verify(
    spark: SparkSession, config: Config, sent: dict[str, str], load: Load, responder: Responder
) -> None:
    """Check every exactly-once invariant on the tables the runs left behind."""
    committed = {tx for tx, kind in sent.items() if kind in ("commit", "first", "checked")}
    never = {tx for tx, kind in sent.items() if kind == "never"}
    rolled_back = set(sent) - committed - never
    ops = verify_ingest(config, load)

    # One final state per transaction, the right one.
    finals = rows(config, "system/transactions")
    assert twice([(r.producer_group, r.transaction_id) for r in finals]) == [], (
        "a final state written twice"
    )
    states = {r.transaction_id: r.state for r in finals}
    assert set(states) == set(sent), "a transaction without a final state"
    wrong = {tx for tx, s in states.items() if s == "COMMITTED"} ^ committed
    wrong |= {tx for tx, s in states.items() if s == "ROLLED_BACK"} ^ rolled_back
    wrong |= {tx for tx, s in states.items() if s == "DISCARDED"} ^ never
    assert not wrong, explain(
        config, wrong=sorted(wrong), sent=sent, states=states, responder=responder
    )
    gone = [(r.producer_group, r.transaction_id) for r in rows(config, "system/discarded")]
    assert twice(gone) == [], "a transaction discarded twice"
    assert {tx for _, tx in gone} == never
    checks = [
        (r.producer_group, r.transaction_id, r.check_number)
        for r in rows(config, "system/check_requests")
    ]
    assert twice(checks) == [], "a check request recorded twice"
    for tx in never:  # checked CHECK_MAX times, then discarded: no check lost
        numbers = sorted(n for _, t, n in checks if t == tx)
        assert numbers == list(range(1, CHECK_MAX + 1)), (tx, numbers)
    verdicts = [r.op_id for r in rows(config, "system/op_verdicts")]
    assert twice(verdicts) == [], "an op judged twice"
    assert {r.op_id for r in ops} - set(verdicts) == set(), "an op without a verdict"

    # Delivered exactly once, dense offsets per (topic, queue) in commit order: the order the
    # coordinator decided (batch), then op store time, then op id (contract 7.1 and 7.8).
    delivered = [r for topic in TOPICS for r in read(spark, config, f"topics/{topic}")]
    assert twice([r.transaction_id for r in delivered]) == [], "a message delivered twice"
    assert {r.transaction_id for r in delivered} == committed, (
        "a committed message lost or a rolled-back or discarded one visible"
    )
    for r in delivered:
        assert bytes(r.body) == f"body-{r.transaction_id}".encode()
    queues: dict[tuple[str, int], list[Any]] = {}
    for r in delivered:
        queues.setdefault((r.topic, r.queue_id), []).append(r)
    for key, messages in queues.items():
        by_offset = sorted(messages, key=lambda r: r.queue_offset)
        assert [r.queue_offset for r in by_offset] == list(range(len(messages))), key
        # The batch by its time first: a new checkpoint generation (a lost checkpoint, a
        # rebuild) numbers its batches from 0 again, while the stage's clock only grows
        # (streams/state/derivation.py `_at`).
        by_commit = sorted(
            messages, key=lambda r: (r.delivered_at, r.batch_id, r.committed_at, r.commit_op_id)
        )
        assert by_offset == by_commit, key
    table = spark.read.format("delta").load(f"{config.warehouse}/system/queue_offsets")
    offsets = {(r.topic, r.queue_id): r.next_offset for r in next_offsets(table).collect()}
    assert offsets == {key: len(messages) for key, messages in queues.items()}

    # The independent reader agrees.
    arrow = [
        tx
        for topic in TOPICS
        for tx in DeltaTable(f"{config.warehouse}/topics/{topic}")
        .to_pyarrow_table()
        .column("transaction_id")
        .to_pylist()
    ]
    assert sorted(arrow) == sorted(committed)


class Scenario:
    """One guarantee test's run: its application starts, the load and the check listener.

    The test drives the faults between `__init__` (the first start, then the load) and
    `finish` (the load stopped, every transaction decided); `close`, in a `finally`, stops
    everything and returns the exit code of the last application's clean stop.
    """

    def __init__(
        self,
        settings: dict[str, str],
        rng: random.Random,
        acceptable: tuple[str, ...] = (),
        master: str = "local[2]",
        spark_conf: dict[str, str] | None = None,
    ) -> None:
        self.config = load_config(overrides=settings)
        if self.config.kafka.topics_per_group:  # before the first start (see the module's doc)
            ensure_group_topics(self.config, GROUP)
        self.runs = AppRuns(settings, master, spark_conf)
        self.runs.acceptable += [re.compile(cause) for cause in acceptable]
        self.apps = [self.runs.start()]
        self.load = Load(self.config, rate=2, rng=random.Random(rng.random()))
        self.responder = Responder(as_group(self.config), answer)
        self.sent: dict[str, str] = {}

    def start(self) -> AppProcess:
        """Start the application once more (and wait until it runs)."""
        self.apps.append(self.runs.start())
        return self.apps[-1]

    def alive(self, when: str) -> AppProcess:
        """Return the newest application, started again if it exited (acceptably)."""
        if (app := alive(self.runs, self.apps[-1], when)) is not self.apps[-1]:
            self.apps.append(app)
        return app

    def finish(self) -> None:
        """Stop the load; wait until every transaction it sent is decided (`drain`)."""
        self.load.stop()
        self.sent = {tx: kind_of(tx) for tx in self.load.sent}
        drain(self.config, self.runs, self.apps, len(self.sent))

    def close(self) -> int:
        """Stop the load and the listener, kill every application but the newest (woken
        first if frozen), stop the newest cleanly; return its exit code (-1: it had exited)."""
        self.load.stop()
        self.responder.stop()
        for app in self.apps[:-1]:
            if app.process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(app.process.pid, signal.SIGCONT)
                app.kill9()
        newest = self.apps[-1]
        code = newest.terminate() if newest.process.poll() is None else -1
        print(self.runs.report(), flush=True)
        return code

    def verify(self, spark: SparkSession) -> None:
        """Check every invariant on the tables the run left behind."""
        verify(spark, self.config, self.sent, self.load, self.responder)
