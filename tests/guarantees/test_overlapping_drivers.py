"""contract 7.10: two coordinators on one warehouse overlap, under load, with kill -9s.

The same mixed load as the crash test (tests/guarantees/test_crash_recovery.py: commits,
rollbacks, transactions only a check decides, never-answered ones that end discarded, a few
malformed records) runs throughout, against real applications (`deploy/submit-coordinator`)
sharing one configuration, as a restarted driver overlapping a stale one would:

1. a zombie (`zombie`): the running coordinator is frozen (SIGSTOP: a long GC pause, a
   partitioned node) at a random moment; a second one starts and runs under load; then the
   first wakes up, in the middle of whatever it was doing. It must stop without writing
   (exit code 3, "fenced"), whatever it was doing;
2. a second coordinator started beside a running one (`second_beside`): the running one
   stops, fenced;
3. the newest is killed with SIGKILL at a random moment and started again.

With the warehouse and the checkpoints on local disk, 1 and 2 run in the crash test's run of
the shared layout (tests/guarantees/test_crash_recovery.py), after its kills and before its
random schedule: one start, one drain and one check of the warehouse for all of them; there
3 is that run's own random kill. Here, in a bucket of an S3 API (moto's server, `s3a://`;
delta-rs commits there with a conditional PUT), the zombie (1) only: 2 and 3 exercise nothing
S3 adds, and the cluster test kills its driver there (tests/guarantees/test_cluster_faults.py).

Then every table must show what the crash test's checks demand (every acknowledged record
landed once, every committed message exactly once with dense queue offsets in commit order,
nothing rolled back or discarded visible, one final state per transaction), and
`system/writers` one claim per start, epochs in order.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from coordinator.app import EXIT_FENCED
from coordinator.protocol.deliveries import delta_rs_location
from coordinator.runtime.local_stack.kafka_broker import KafkaBroker
from coordinator.runtime.local_stack.s3_server import S3Server
from delta_tables import writers
from streams.query.decision_query import QUERY_NAME
from tests.app_process import AppProcess
from tests.guarantees.app_runs import exit_reason
from tests.guarantees.mixed_load import Scenario, settings_of
from tests.harness import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: Seconds a fenced coordinator may take to notice and stop (a frozen JVM first catches up).
FENCED_BOUND = 180
#: Spark's own checkpoint log stops the newer query when the older one wrote a batch it also
#: planned: a restart (a newer epoch) follows, as a supervisor's would.
CONCURRENT_LOG = r"CONCURRENT_STREAM_LOG_UPDATE|Multiple streaming jobs"


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


def batches_with_rows(app: AppProcess) -> int:
    """Return how many coordinator batches that landed records `app` has logged so far."""
    count = 0
    for line in app.lines():
        if "txcoord.progress: " in line:
            summary = json.loads(line.split("txcoord.progress: ", 1)[1])
            count += summary.get("query") == QUERY_NAME and bool(summary.get("rows"))
    return count


def writer_epochs(run: Scenario) -> list[int]:
    """Return the epochs claimed in the run's `system/writers`, sorted."""
    claims = DeltaTable(delta_rs_location(writers.TABLE.path(run.config.warehouse)))
    return sorted(claims.to_pyarrow_table().column("epoch").to_pylist())


def zombie(run: Scenario, rng: random.Random) -> None:
    """Freeze the newest coordinator at a random moment, start a newer one, wake the frozen
    one once the newer has written under the load: it must stop fenced."""
    # The sleeps are the scenario (when the freeze comes, how long the overlap lasts);
    # every check after them waits for a positive marker.
    time.sleep(rng.uniform(4, 10))
    first = run.alive("before the freeze")
    os.killpg(first.process.pid, signal.SIGSTOP)
    second = run.start()
    # The zombie wakes once the newer one has taken over and written under the load (a
    # positive marker: two of its batches landed records), at a random moment after; a
    # fixed 20-40 s was mostly waiting once that had happened. (Should the newer one exit
    # meanwhile, `alive` judges its reason and starts it again.)
    wait_for(
        lambda: batches_with_rows(second) >= 2 or second.process.poll() is not None,
        FENCED_BOUND,
        "two batches of the newer coordinator",
    )
    time.sleep(rng.uniform(3, 10))
    os.killpg(first.process.pid, signal.SIGCONT)
    wait_fenced(first, "the coordinator that froze")


def second_beside(run: Scenario) -> None:
    """Start a second coordinator beside the running one: the running one must stop fenced."""
    running = run.alive("before the second coordinator")
    run.start()
    wait_fenced(running, "the coordinator running when a newer one started")


@pytest.mark.timeout(2400)
def test_a_frozen_coordinator_woken_on_s3_is_fenced_and_nothing_is_lost_or_doubled(
    *,
    spark: SparkSession,
    broker: KafkaBroker,
    tmp_path: Path,
    rng: random.Random,
    s3_api: S3Server,
    s3_warehouse: str,
) -> None:
    began = time.monotonic()
    s3_api.configure(spark)  # the test reads the topics back through s3a too
    checkpoints = f"{s3_warehouse.rsplit('/', 1)[0]}/checkpoints"
    settings = settings_of(
        broker.bootstrap_servers,
        tmp_path,
        warehouse=s3_warehouse,
        **{"streams.checkpoint_dir": checkpoints},
    )
    run = Scenario(settings, rng, acceptable=(CONCURRENT_LOG,))
    try:
        # On S3 the zombie is the case to prove: a stale writer's commit refused there by
        # the conditional PUT.
        zombie(run, rng)
        run.finish()
    finally:
        code = run.close()
    assert code == 0, run.apps[-1].tail()
    run.verify(spark)
    epochs = writer_epochs(run)
    # One claim per start that got as far as its query (a start that died before claims
    # nothing), never two alike: consecutive from 1.
    assert epochs == list(range(1, len(epochs) + 1)), epochs
    assert 2 <= len(epochs) <= run.runs.starts, (epochs, run.runs.starts)
    print(
        f"overlap test (s3): {time.monotonic() - began:.0f} s, {len(run.sent)} transactions, "
        f"{run.runs.starts} starts",
        flush=True,
    )
