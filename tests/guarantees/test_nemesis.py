"""contract 7.1-7.3, 7.8, 7.10, 7.11: a seeded random schedule of faults under load, one checker.

Beside the hand-written fault tests, a nemesis (Jepsen's method): the crash test's mixed load
of transactions runs against the real application (`deploy/submit-coordinator`) and a broker
of the test's own, while a schedule drawn from the test's seed inflicts faults one after the
other, a few seconds of load apart: kill -9 of the coordinator at a random moment or at a
failpoint, kill -9 of the broker, a frozen driver (SIGSTOP, SIGCONT), a clean stop, a lost
checkpoint, a second coordinator beside the running one, `txcoord state rebuild` into another
partition count (tests/guarantees/nemesis.py describes each and how the schedule is drawn).
After each fault the test waits until a coordinator runs past it. Then, once, the checker over
the whole history and the warehouse: every acknowledged record landed once, one final state
per transaction and the right one, every committed message delivered exactly once with dense
queue offsets in commit order, nothing rolled back or discarded visible, discards after
exactly `transaction_check_max` checks, no check twice (tests/guarantees/mixed_load.py
`verify`), and one writer epoch per claim, never two alike (`system/writers`).

The gate runs a short schedule (DEFAULT_STEPS). A longer one, or a failing seed again:

    TXCOORD_NEMESIS_STEPS=12 .venv/bin/pytest tests/guarantees/test_nemesis.py -s
    TXCOORD_TEST_SEED=<seed> .venv/bin/pytest tests/guarantees/test_nemesis.py -s

The seed draws the schedule, so the same seed and step count replay the same faults at the
same points of the load (how the machine's timing falls between them cannot be replayed).
Every failure message carries the seed and the history of the steps so far; `-s` prints the
history as it goes. Unplanned exits are judged in tests/guarantees/app_runs.py: only known,
acceptable causes are restarted (a fenced or superseded start's concurrent-log error too,
as in the overlap test).
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from coordinator.protocol.deliveries import delta_rs_location
from coordinator.runtime.local_stack.kafka_broker import KafkaBroker
from delta_tables import writers
from tests.conftest import SEED_ENV, SEED_KEY
from tests.guarantees import app_runs
from tests.guarantees.mixed_load import Scenario, settings_of
from tests.guarantees.nemesis import History, Nemesis, plan
from tests.guarantees.test_overlapping_drivers import CONCURRENT_LOG

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

STEPS_ENV = "TXCOORD_NEMESIS_STEPS"
#: The gate's schedule: three faults, about four minutes on an idle 2-core host (each
#: application start costs 20-60 s; tests/budget.toml).
DEFAULT_STEPS = 3
#: How many steps this run takes. Taken out of the environment at once: the application
#: reads every `TXCOORD_*` variable as configuration and refuses an unknown one.
STEPS = int(os.environ.pop(STEPS_ENV, None) or DEFAULT_STEPS)
#: Seconds for the whole test: the first start, draining and checking, then per step up to
#: two starts on a loaded host and a failpoint to reach.
TIMEOUT = 900 + 420 * STEPS


@pytest.mark.timeout(TIMEOUT)
def test_a_random_schedule_of_faults_loses_and_duplicates_nothing(
    *,
    spark: SparkSession,
    broker: KafkaBroker,
    tmp_path: Path,
    rng: random.Random,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    began = time.monotonic()
    schedule = plan(rng, STEPS)  # first: the seed alone names the schedule
    history = History(request.node.stash[SEED_KEY], schedule, SEED_ENV)
    print(history.text(), flush=True)
    # A longer schedule meets more acceptable exits (one broker kill may cost one): the crash
    # test's limit holds for the gate's three steps and grows with the steps beyond.
    monkeypatch.setattr(app_runs, "MAX_UNPLANNED", max(app_runs.MAX_UNPLANNED, STEPS // 2))
    try:
        with history.told():
            run = Scenario(
                settings_of(broker.bootstrap_servers, tmp_path), rng, acceptable=(CONCURRENT_LOG,)
            )
            try:
                nemesis = Nemesis(run, broker, history)
                for step in schedule:
                    nemesis.step(step)
                # The schedule: 5 s more of load (10 transactions) after the last fault,
                # which `finish` then waits to see decided.
                time.sleep(5)
                run.alive("before draining")
                run.finish(spark)  # every transaction decided, the watermark a check interval on
            finally:
                code = run.close()
            history.note(f"drained and stopped: {len(run.sent)} transactions, exit code {code}")
            assert code == 0, run.apps[-1].tail()
            run.verify(spark)
            claims = DeltaTable(delta_rs_location(writers.TABLE.path(run.config.warehouse)))
            epochs = sorted(claims.to_pyarrow_table().column("epoch").to_pylist())
            # Every start and rebuild that got as far as its claim took the next epoch,
            # never one another had: consecutive from 1.
            assert epochs == list(range(1, len(epochs) + 1)), epochs
            history.note(
                f"verified: {run.runs.starts} starts, {nemesis.rebuilds} rebuilds, "
                f"{len(epochs)} writer epochs, {len(run.runs.unplanned)} unplanned restarts"
            )
    finally:
        print(history.text(), flush=True)
    print(f"nemesis: {time.monotonic() - began:.0f} s, {STEPS} steps", flush=True)
