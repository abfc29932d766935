"""contract 7.1, 7.7: kill -9 of the coordinator application and of the broker, under load.

One run of the real engine (`deploy/submit-coordinator`) against a broker of the test's own,
while a producer keeps sending a mix of transactions (some never answered, so they are
discarded; a few malformed records, so quarantine is written) and a listener answers check
requests. The application is killed with SIGKILL (the whole process tree at once) at every
failpoint between the writes of a micro-batch (coordinator/core/failpoints.py; that every
failpoint of the code is armed here is test_failpoint_coverage.py), once at a random moment,
and the broker is killed once while the application runs. After a final clean run every
table must show: every acknowledged record landed, every committed message exactly once,
nothing rolled back or discarded visible, one final state per transaction, dense queue
offsets in commit order, no row written twice.

The random moments come from one seeded generator (the `rng` fixture of tests/conftest.py):
the seed is printed and named in the failure report, and `TXCOORD_TEST_SEED=<seed>` replays
the same choices.

Unplanned restarts (the application exiting on its own) are printed with their reasons and
judged in tests/guarantees/app_runs.py: only known, acceptable causes are restarted.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import load_config
from coordinator.runtime.local_stack.kafka_broker import KafkaBroker
from tests.guarantees.app_runs import AppRuns
from tests.guarantees.mixed_load import Load, answer, kind_of, settings_of, verify
from tests.harness import Responder, last_progress, wait_for, watermark_past

#: Ten application starts and their kills: a long module (tests/conftest.py orders by it).
pytestmark = pytest.mark.long(6.6)

#: The application starts that end at failpoints, in order (name=N: the N-th pass of that
#: failpoint), one failpoint per start: one query lands and decides in one thread per table,
#: so two failpoints of one start could not both be reached (coordinator/core/failpoints.py).
#: The discard comes first: it needs CHECK_MAX checks of one transaction, i.e. several
#: coordinator batches, which are quickest while the backlog is small (on a loaded machine a
#: late start's batches took 60-110 s each and the discard missed the bound).
CRASH_STARTS: tuple[tuple[str, ...], ...] = (
    ("coordinator.after_discarded=1",),
    ("ingest.after_half_messages=1",),
    ("coordinator.after_topic_append=1",),
    ("ingest.after_op_records=1",),
    ("coordinator.after_queue_offsets=1",),
    ("ingest.after_quarantine=1",),
    ("coordinator.after_check_requests=1",),
    ("ingest.after_batch=2",),
    ("coordinator.after_check_topic=1",),
    ("coordinator.after_transactions=1",),
    ("coordinator.after_op_verdicts=1",),
    ("coordinator.after_batch=1",),
)
FAILPOINTS = tuple(spec for start in CRASH_STARTS for spec in start)


@pytest.mark.timeout(3600)  # ten application starts, each 30-90 s of JVM and Spark warm-up
def test_kill_minus_nine_anywhere_loses_and_duplicates_nothing(
    spark: SparkSession, broker: KafkaBroker, tmp_path: Path, rng: random.Random
) -> None:
    began = time.monotonic()
    settings = settings_of(broker.bootstrap_servers, tmp_path)
    config = load_config(overrides=settings)
    runs = AppRuns(settings)
    app = runs.start()
    load = Load(config, rate=2, rng=random.Random(rng.random()))
    responder = Responder(config, answer)
    try:
        # The sleeps up to load.stop() are the scenario (when the kills come, how long the
        # broker is away, how long the load runs on), not synchronisation: whatever the
        # machine does meanwhile, the checks after them wait for positive markers.
        time.sleep(rng.uniform(5, 12))
        if app.process.poll() is not None:
            runs.exited(app, "before the random kill")
        app.kill9()  # at a random moment
        for specs in CRASH_STARTS:
            runs.crash_at(specs)
        app = runs.start()
        time.sleep(rng.uniform(3, 10))
        runs.broker_killed = True
        broker.kill()
        time.sleep(3)  # the broker is away for 3 s
        broker.start()
        time.sleep(10)  # the load goes on for 10 s after the broker is back
        load.stop()
        if app.process.poll() is not None:  # the broker's death may have stopped it
            runs.exited(app, "after the broker kill")
            app = runs.start()
        sent = {tx: kind_of(tx) for tx in load.sent}
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            finals = spark.read.format("delta").load(f"{config.warehouse}/system/transactions")
            if finals.select("transaction_id").distinct().count() >= len(sent):
                break
            if app.process.poll() is not None:
                runs.exited(app, "while draining")
                app = runs.start()
            time.sleep(3)
        # A check wrongly sent after a decision or a discard would be due within a check
        # interval: once the application's event time is past that, it would show.
        due = time.time() + config.transaction_check_interval.total_seconds()
        wait_for(
            lambda: watermark_past(last_progress(app.lines()), due),
            300,
            "the application's watermark to pass one check interval",
        )
    finally:
        load.stop()
        responder.stop()
        code = app.terminate() if app.process.poll() is None else app.process.returncode
        print(runs.report(), flush=True)
    assert code == 0, app.tail()
    verify(spark, config, sent, load, responder)
    print(
        f"crash test: {time.monotonic() - began:.0f} s, {len(sent)} transactions, "
        f"{len(load.malformed)} malformed records",
        flush=True,
    )
