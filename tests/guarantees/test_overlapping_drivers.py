"""contract 7.10: two coordinators on one warehouse overlap, under load, with kill -9s.

The same mixed load as the crash test (tests/guarantees/test_crash_recovery.py: commits,
rollbacks, transactions only a check decides, never-answered ones that end discarded, a few
malformed records) runs throughout, against real applications (`deploy/submit-coordinator`)
sharing one configuration, as a restarted driver overlapping a stale one would:

1. a zombie: the running coordinator is frozen (SIGSTOP: a long GC pause, a partitioned
   node) at a random moment; a second one starts and runs under load; then the first wakes
   up, in the middle of whatever it was doing. It must stop without writing (exit code 3,
   "fenced"), whatever it was doing;
2. a second coordinator started beside a running one: the running one stops, fenced;
3. the newest is killed with SIGKILL at a random moment and started again.

Then every table must show what the crash test's checks demand (every acknowledged record
landed once, every committed message exactly once with dense queue offsets in commit order,
nothing rolled back or discarded visible, one final state per transaction), and
`system/writers` one claim per start, epochs in order.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from coordinator.app import EXIT_FENCED
from coordinator.core.config import load_config
from coordinator.runtime.local_stack.kafka_broker import KafkaBroker
from delta_tables import writers
from tests.app_process import AppProcess
from tests.guarantees.app_runs import AppRuns, exit_reason
from tests.guarantees.mixed_load import Load, alive, answer, drain, kind_of, settings_of, verify
from tests.harness import Responder

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long(4)]

#: Seconds a fenced coordinator may take to notice and stop (a frozen JVM first catches up).
FENCED_BOUND = 180
#: Spark's own checkpoint log stops the newer query when the older one wrote a batch it also
#: planned: a restart (a newer epoch) follows, as a supervisor's would.
CONCURRENT_LOG = re.compile(r"CONCURRENT_STREAM_LOG_UPDATE|Multiple streaming jobs")


def wait_fenced(app: AppProcess, what: str) -> None:
    """Wait until `app` stopped as fenced: exit code 3 and the message that says who took over."""
    try:
        code = app.process.wait(FENCED_BOUND)
    except subprocess.TimeoutExpired:
        app.kill9()
        raise AssertionError(
            f"{what} still ran {FENCED_BOUND} s after a newer one started:\n{app.tail(60)}"
        ) from None
    reason = exit_reason(app)
    assert code == EXIT_FENCED, f"{what} exited {code}: {reason}\n{app.tail(60)}"
    assert "is fenced" in reason, reason
    print(f"overlap test: {what} stopped fenced: {reason[:160]}", flush=True)


@pytest.mark.timeout(2400)
def test_a_newer_coordinator_fences_the_older_one_and_nothing_is_lost_or_doubled(
    spark: SparkSession, broker: KafkaBroker, tmp_path: Path, rng: random.Random
) -> None:
    began = time.monotonic()
    settings = settings_of(broker.bootstrap_servers, tmp_path)
    config = load_config(overrides=settings)
    runs = AppRuns(settings)
    runs.acceptable.append(CONCURRENT_LOG)
    first = runs.start()
    load = Load(config, rate=2, rng=random.Random(rng.random()))
    responder = Responder(config, answer)
    apps = [first]
    try:
        # The sleeps are the scenario (when the freeze and the kill come, how long the
        # overlap lasts); every check after them waits for a positive marker.
        time.sleep(rng.uniform(4, 10))
        os.killpg(first.process.pid, signal.SIGSTOP)
        second = runs.start()
        apps.append(second)
        time.sleep(rng.uniform(20, 40))
        os.killpg(first.process.pid, signal.SIGCONT)
        wait_fenced(first, "the coordinator that froze")

        second = alive(runs, second, "after the frozen one woke")
        third = runs.start()
        apps.append(third)
        wait_fenced(second, "the coordinator running when a newer one started")

        time.sleep(rng.uniform(3, 10))
        third = alive(runs, third, "before the random kill")
        third.kill9()
        apps.append(runs.start())
        time.sleep(10)
        load.stop()
        sent = {tx: kind_of(tx) for tx in load.sent}
        drain(spark, config, runs, apps, len(sent))
    finally:
        load.stop()
        responder.stop()
        for app in apps[:-1]:
            if app.process.poll() is None:
                os.killpg(app.process.pid, signal.SIGCONT)
                app.kill9()
        code = apps[-1].terminate() if apps[-1].process.poll() is None else -1
        print(runs.report(), flush=True)
    assert code == 0, apps[-1].tail()
    verify(spark, config, sent, load, responder)
    claims = DeltaTable(writers.TABLE.path(config.warehouse)).to_pyarrow_table()
    epochs = sorted(claims.column("epoch").to_pylist())
    # One claim per start that got as far as its query (a start that died before claims
    # nothing), never two alike: consecutive from 1.
    assert epochs == list(range(1, len(epochs) + 1)), epochs
    assert 4 <= len(epochs) <= runs.starts, (epochs, runs.starts)
    print(
        f"overlap test: {time.monotonic() - began:.0f} s, {len(sent)} transactions, "
        f"{runs.starts} starts",
        flush=True,
    )
