"""A crash between the landing tables' commits, then a start without the checkpoint (issue 60.3).

One coordinator batch lands its records in three Delta commits, one per table
(`system/half_messages`, `system/op_records`, `system/quarantine`), side by side. Stopped
after one of them committed and before the others did (at the failpoint `ingest.after_<table>`,
here raising where the crash tests kill -9), and started again without its checkpoint, the
coordinator derives its state from the warehouse (contract 7.11) and must read Kafka again
from where every record is landed: each table's records of that batch land once, none twice,
and every transaction is decided once. Before, the start resumed each partition after the
newest record any table held: a record that landed later in the partition in another table
hid the ones before it, which were never landed (nor decided).

The records are laid out so that every table's commit hides something from the old rule: on
partition 0 of each ingress topic a malformed record, the valid ones, another malformed one.
The test stands in for the kill -9 in the process itself: the surviving table's failpoint
raises, the other tables' writes wait for it and raise before they commit; the batch's
decisions are written meanwhile (the parallel writes wait for each other), so the warehouse
also holds decisions on records it never landed, as after a kill -9 of the batch. One case
has no survivor: decisions committed, no landing commit at all.
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from kafka import KafkaProducer
from kafka.partitioner.abc import Partitioner
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.core.failpoints import failpoint
from coordinator.protocol import ingress as fmt
from coordinator.runtime import engine as runtime
from delta_tables import half_messages, op_records, quarantine
from streams.ingest import landing_query
from streams.ingest.landing_query import IngestBatchWriter
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from streams.state.rebuild import rebuild
from tests.harness import GROUP, TOPIC, Engine, Producer, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

LANDING = (half_messages.TABLE.name, op_records.TABLE.name, quarantine.TABLE.name)
#: A check immunity longer than the test: nothing is checked, so every decision is an op's.
IMMUNITY = "3600"


class CrashError(RuntimeError):
    """Where the test's batch ends, as a kill -9 there would."""


class LandingCrash:
    """Ends the next landing of a coordinator batch between its tables' commits: `survivor`
    commits (and stops at its failpoint, `ingest.after_<name>`), the other landing tables do
    not. Only the decision query's writes (not a rebuild's own)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, survivor: str | None) -> None:
        self.armed = True
        self.reached = threading.Event()
        here = threading.local()
        original = IngestBatchWriter._append

        def append(writer: IngestBatchWriter, spark: SparkSession, rows: Any, spec: Any,
                   batch_id: int, *rest: Any) -> None:  # fmt: skip
            ours = self.armed and writer.ledger.app_id.startswith("txcoord-coordinator-")
            if ours and spec.name != survivor:
                if survivor is not None:
                    self.reached.wait(120)  # the survivor's commit first
                raise CrashError(f"{spec.name} not committed (batch {batch_id})")
            here.ours = ours
            original(writer, spark, rows, spec, batch_id, *rest)

        def crash_at(name: str) -> None:
            wanted = f"ingest.after_{(survivor or '').removeprefix('system/')}"
            if self.armed and getattr(here, "ours", False) and name == wanted:
                self.reached.set()
                raise CrashError(name)
            failpoint(name)

        monkeypatch.setattr(IngestBatchWriter, "_append", append)
        monkeypatch.setattr(landing_query, "failpoint", crash_at)


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="3s",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


@pytest.fixture
def sender(config: Config) -> Iterator[Sender]:
    ensure_ingress_topics(config)  # sent to before the engine's first start
    sent = Sender(config)
    try:
        yield sent
    finally:
        sent.close()


class Sender:
    """Sends to partition 0 of each ingress topic, and remembers where each record went."""

    def __init__(self, config: Config) -> None:
        self.config = config
        # Every record to partition 0: one partition where the tables' records interleave.
        self.producer = Producer(config, partitioner=FirstPartition())
        self.kafka: KafkaProducer = self.producer.kafka
        self.halves: dict[str, tuple[int, int]] = {}  # tx -> (partition, offset)
        self.ops: dict[str, tuple[int, int]] = {}
        self.malformed: set[tuple[str, int, int]] = set()

    def half(self, tx: str) -> None:
        self.halves[tx] = _at(self.producer.half(tx, queue_id=0, immunity=IMMUNITY))

    def commit(self, tx: str) -> None:
        self.ops[tx] = _at(self.producer.op(tx, "COMMIT"))

    def malformed_half(self, n: int) -> None:
        topic = self.config.kafka.half_topic
        sent = self.kafka.send(topic, key=f"bad-{n}".encode(), value=b"no headers")
        self.malformed.add((topic, *_at(sent)))

    def malformed_op(self, n: int) -> None:
        topic = self.config.kafka.op_topic
        headers = [(fmt.PRODUCER_GROUP, GROUP.encode()), (fmt.OP, b"MAYBE")]
        sent = self.kafka.send(topic, key=f"bad-op-{n}".encode(), headers=headers)
        self.malformed.add((topic, *_at(sent)))

    def batch(self, name: str, halves: int, commits: int) -> list[str]:
        """Send a batch's worth: on each topic a malformed record, the valid ones, another
        malformed one; commit the first `commits` halves. Return the halves' ids."""
        txs = [f"{name}-{i}" for i in range(halves)]
        self.malformed_half(2 * len(self.malformed))
        for tx in txs:
            self.half(tx)
        self.malformed_half(2 * len(self.malformed))
        self.malformed_op(2 * len(self.malformed))
        for tx in txs[:commits]:
            self.commit(tx)
        self.malformed_op(2 * len(self.malformed))
        self.kafka.flush(60)
        return txs

    def close(self) -> None:
        self.producer.close()


class FirstPartition(Partitioner):
    """Every record to partition 0."""

    def partition(self, *args: Any) -> int:
        return 0


def _at(future: Any) -> tuple[int, int]:
    meta = future.get(timeout=60)
    return int(meta.partition), int(meta.offset)


def crashed_run(spark: SparkSession, config: Config, survivor: str | None) -> None:
    """Run the engine until its first batch has crashed, then stop it; `survivor` alone of
    the landing tables has committed (None: none has)."""
    before = landed(config)
    crashed = runtime.Engine(spark, config).start()
    try:
        query = crashed.coordinator
        assert query is not None
        wait_for(lambda: not query.isActive, 120, "the batch to crash")
        assert "CrashError" in str(query.exception()), query.exception()
    finally:
        crashed.stop()
    after = landed(config)
    assert {name for name in LANDING if after[name] != before[name]} == {survivor} - {None}


def landed(config: Config) -> dict[str, int]:
    """Return how many rows each landing table holds (0: none yet, or no table)."""
    return {name: len(rows(config, name, lambda r: True)) for name in LANDING}


@pytest.mark.parametrize("survivor", [*LANDING, None], ids=[*LANDING, "none"])
def test_a_rebuild_after_a_crash_between_the_landing_commits_lands_and_decides_once(
    spark: SparkSession,
    config: Config,
    sender: Sender,
    monkeypatch: pytest.MonkeyPatch,
    survivor: str | None,
) -> None:
    """`survivor` None: no landing table committed, and the batch's decisions did (the
    landing runs beside them): the decisions' commits must tell which batch it was."""
    first = sender.batch("first", halves=6, commits=3)
    crash = LandingCrash(monkeypatch, survivor)
    crashed_run(spark, config, survivor)
    crash.armed = False
    shutil.rmtree(config.streams.checkpoint_dir)  # lost: the state comes from the warehouse

    engine = Engine(spark, config)
    try:
        for tx in first[3:]:
            sender.commit(tx)
        later = sender.batch("later", halves=3, commits=3)
        committed = first + later
        wait_for(lambda: sorted(delivered(config)) == sorted(committed), 150,
                 "every committed half delivered")  # fmt: skip
    finally:
        engine.stop()
    verify(config, sender, committed)


def test_a_second_crash_in_the_first_batch_after_the_rebuild_is_still_exactly_once(
    spark: SparkSession,
    config: Config,
    sender: Sender,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Crashed between the landing commits, the checkpoint lost; the start that derives the
    state crashes the same way in its own first batch (the rebuild unfinished), and `txcoord
    state rebuild` finishes it; that batch crashes once more after it, and the checkpoint is
    lost again: the next start derives it again."""
    first = sender.batch("first", halves=4, commits=2)
    crash = LandingCrash(monkeypatch, quarantine.TABLE.name)
    crashed_run(spark, config, quarantine.TABLE.name)
    crash.armed = False
    shutil.rmtree(config.streams.checkpoint_dir)

    second = sender.batch("second", halves=4, commits=2)
    crash = LandingCrash(monkeypatch, half_messages.TABLE.name)
    with pytest.raises(Exception, match="CrashError"):
        Engine(spark, config)  # the rebuild's first batch crashes
    crash.armed = False
    rebuild(spark, config, config.spark.shuffle_partitions, "warehouse")  # finished

    third = sender.batch("third", halves=4, commits=2)
    crash = LandingCrash(monkeypatch, op_records.TABLE.name)
    crashed_run(spark, config, op_records.TABLE.name)
    crash.armed = False
    shutil.rmtree(config.streams.checkpoint_dir)

    engine = Engine(spark, config)
    try:
        for tx in first[2:] + second[2:] + third[2:]:
            sender.commit(tx)
        committed = first + second + third
        sender.kafka.flush(60)
        wait_for(lambda: sorted(delivered(config)) == sorted(committed), 150,
                 "every committed half delivered")  # fmt: skip
    finally:
        engine.stop()
    verify(config, sender, committed)


def verify(config: Config, sender: Sender, committed: list[str]) -> None:
    """Every record sent landed once in its table, every transaction decided once."""
    halves = rows(config, half_messages.TABLE.name, lambda r: r["kind"] == "HALF")
    at = Counter((r["ingress_partition"], r["ingress_offset"]) for r in halves)
    assert [key for key, n in at.items() if n > 1] == [], "a half landed twice"
    assert set(sender.halves.values()) - set(at) == set(), "an acknowledged half not landed"
    ops = rows(config, op_records.TABLE.name, lambda r: r["kind"] == "OP")
    at = Counter((r["ingress_partition"], r["ingress_offset"]) for r in ops)
    assert [key for key, n in at.items() if n > 1] == [], "an op landed twice"
    assert set(sender.ops.values()) - set(at) == set(), "an acknowledged op not landed"
    refused = Counter(
        (r["source_topic"], r["source_partition"], r["source_offset"])
        for r in rows(config, quarantine.TABLE.name, lambda r: True)
    )
    assert [key for key, n in refused.items() if n > 1] == [], "a record quarantined twice"
    assert sender.malformed - set(refused) == set(), "an acknowledged malformed record lost"

    shipped = delivered(config)
    assert sorted(shipped) == sorted(committed), Counter(shipped).most_common(3)  # each once
    finals = Counter(
        (r["transaction_id"], r["state"]) for r in rows(config, "system/transactions", all_rows)
    )
    assert finals == Counter((tx, "COMMITTED") for tx in committed), finals
    verdicts = Counter(r["op_id"] for r in rows(config, "system/op_verdicts", all_rows))
    assert max(verdicts.values()) == 1, verdicts.most_common(3)  # each op judged once
    assert {r["op_id"] for r in ops} - set(verdicts) == set(), "an op without a verdict"


def all_rows(row: dict[str, Any]) -> bool:
    return True


def rows(config: Config, name: str, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Return the rows of warehouse table `name` that `keep` keeps ([]: no table yet).

    Read with delta-rs, the library the coordinator commits its batches with: the same
    snapshot as a Spark read, without a Spark job per read (a second or more each, and
    the test reads after every step and once a second while it waits).
    """
    try:
        found = DeltaTable(f"{config.warehouse}/{name}").to_pyarrow_table().to_pylist()
    except TableNotFoundError:  # not created yet
        return []
    return [row for row in found if keep(row)]


def delivered(config: Config) -> list[str]:
    """Return the transaction id of every row of the topic table (repeats included)."""
    return [row["transaction_id"] for row in rows(config, f"topics/{TOPIC}", all_rows)]
