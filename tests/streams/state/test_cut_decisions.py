"""A crash between a batch's decision commits, then a start without the checkpoint (issue 60).

A batch writes a commit as a chain: the delivery (the topic table), the final state
(`system/transactions`), the deciding op's verdict (`system/op_verdicts`). Stopped between
two of them and started again without its checkpoint, the coordinator derives its state from
the warehouse (contract 7.11), which takes the delivery as committed and the op as judged:
unless the start writes what the batch left unwritten (streams/state/decision_repair.py), the
transaction never gets its final state and the op never its verdict. A hogged run of the
per-group crash test found it: 11 delivered transactions without a final state, `drain`
waiting for them for good.

The test stands in for the kill -9 in the process itself, as
tests/streams/ingest/test_partial_landing.py does: the failpoint after the step raises, so the
batch's later commits never happen.
"""

from __future__ import annotations

import shutil
import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.core.failpoints import failpoint
from coordinator.runtime import engine as runtime
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from streams.query import batch_writer
from tests.harness import Engine, rows, table, wait_for
from tests.streams.conftest import ConfigFactory
from tests.streams.ingest.test_partial_landing import CrashError, Sender, delivered

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="3s",
        **{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"},
    )


@pytest.fixture
def sender(config: Config) -> Iterator[Sender]:
    ensure_ingress_topics(config)
    sent = Sender(config)
    try:
        yield sent
    finally:
        sent.close()


class DecisionCrash:
    """Ends the coordinator's next batch that passes failpoint `name`, there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
        self.armed = True
        self.reached = threading.Event()

        def crash_at(passed: str) -> None:
            if self.armed and passed == name:
                self.reached.set()
                raise CrashError(passed)
            failpoint(passed)

        monkeypatch.setattr(batch_writer, "failpoint", crash_at)


def crashed_run(spark: SparkSession, config: Config, crash: DecisionCrash) -> None:
    """Run the engine until a batch crashed at the armed failpoint, then stop it and lose
    its checkpoint. A start without its checkpoint runs its first batch before it returns
    (streams/state/rebuild.py): the crash may end the start itself."""
    try:
        crashed = runtime.Engine(spark, config).start()
    except Exception as error:  # only the crash, asserted below
        assert "CrashError" in str(error), error
    else:
        try:
            query = crashed.coordinator
            assert query is not None
            wait_for(lambda: not query.isActive, 120, "the batch to crash")
            assert "CrashError" in str(query.exception()), query.exception()
        finally:
            crashed.stop()
    assert crash.reached.is_set()
    crash.armed = False
    shutil.rmtree(config.streams.checkpoint_dir)


def finals(spark: SparkSession, config: Config) -> Counter[tuple[str, str]]:
    found = rows(config, "system/transactions")
    return Counter((r.transaction_id, r.state) for r in found)


def verdicts(spark: SparkSession, config: Config) -> Counter[str]:
    return Counter(r.op_id for r in rows(config, "system/op_verdicts"))


def test_a_start_without_the_checkpoint_writes_what_a_cut_decision_left_unwritten(
    spark: SparkSession, config: Config, sender: Sender, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cut after the final states (no verdicts), then after the deliveries (neither)."""
    first = sender.batch("first", halves=4, commits=2)
    crashed_run(spark, config, DecisionCrash(monkeypatch, "coordinator.after_transactions"))
    # The cut is where it should be: final states written, their ops not judged.
    assert finals(spark, config) == Counter((tx, "COMMITTED") for tx in first[:2])
    assert verdicts(spark, config) == Counter()

    second = sender.batch("second", halves=4, commits=2)
    crash = DecisionCrash(monkeypatch, "coordinator.after_topic_append")
    crashed_run(spark, config, crash)
    assert sorted(delivered(config)) == sorted(first[:2] + second[:2])
    assert not any(tx in second for tx, _ in finals(spark, config))

    engine = Engine(spark, config)
    try:
        for tx in first[2:] + second[2:]:
            sender.commit(tx)
        sender.kafka.flush(60)
        committed = first + second
        wait_for(
            lambda: (
                sorted(delivered(config)) == sorted(committed)
                and sum(finals(spark, config).values()) == len(committed)
            ),
            150,
            "every committed half delivered and decided",
        )
    finally:
        engine.stop()
    assert sorted(delivered(config)) == sorted(committed)  # each once
    assert finals(spark, config) == Counter((tx, "COMMITTED") for tx in committed)
    judged = verdicts(spark, config)
    assert max(judged.values()) == 1, judged.most_common(3)  # each op judged once
    ops = {r.op_id for r in table(spark, config, "system/op_records").collect() if r.kind == "OP"}
    assert ops - set(judged) == set(), "an op without a verdict"
    # The rows written for the cut batches are those the batch would have written.
    rows = {r.transaction_id: r for r in table(spark, config, "system/transactions").collect()}
    for tx in first[:2] + second[:2]:
        assert (rows[tx].reason, rows[tx].check_count) == ("op", 0), rows[tx]
        assert rows[tx].deciding_op_id is not None and rows[tx].prepared_at is not None
