"""contract 7.1 on a Spark standalone cluster: a worker dies with its executor, under load.

A master and two workers (one core each) from pyspark's own distribution
(tests/spark_cluster.py); the coordinator application is submitted to it
(`deploy/submit-coordinator --master spark://…`) with one executor per worker, and the crash
test's mixed load runs throughout (tests/guarantees/mixed_load.py). At a random moment worker
1 is killed with SIGKILL together with its executor, as a lost machine: the stage's tasks
that ran there fail and run again on the other executor, which loads their state from the
checkpoint. 20 s later the worker is started again and the master gives the application a new
executor. The application must go on by itself (no restart), and every invariant of the
crash test must hold after a clean stop.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.runtime.local_stack.kafka_broker import KafkaBroker
from tests.conftest import unavailable
from tests.guarantees.mixed_load import Scenario, settings_of
from tests.harness import wait_for
from tests.spark_cluster import ClusterError, StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long(4)]

APP_NAME = "txcoord-coordinator"
#: One executor per worker, each the worker's one core.
EXECUTORS = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"}


def executors_granted(cluster: StandaloneCluster) -> int:
    """Return the cores the master grants the running application now."""
    running = [a for a in cluster.applications(APP_NAME) if a["state"] == "RUNNING"]
    return int(running[0]["cores"]) if running else 0


@pytest.mark.timeout(2400)
def test_a_lost_worker_and_its_executor_lose_and_double_nothing(
    spark: SparkSession,
    broker: KafkaBroker,
    tmp_path: Path,
    rng: random.Random,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    began = time.monotonic()
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver on loopback, as the cluster
    try:
        cluster = StandaloneCluster(tmp_path / "spark", cores=1, memory="1536m", workers=2)
        cluster.start()
    except ClusterError as exc:
        unavailable("Spark standalone cluster", exc)
    with cluster:  # kills master, workers and executors; prints their logs on a failure
        run = Scenario(
            settings_of(broker.bootstrap_servers, tmp_path),
            rng,
            master=cluster.master_url,
            spark_conf=EXECUTORS,
        )
        try:
            wait_for(lambda: executors_granted(cluster) == 2, 120, "two executors granted")
            time.sleep(rng.uniform(5, 15))
            cluster.kill_worker(1)
            print("worker test: killed worker 1 and its executor", flush=True)
            time.sleep(20)
            cluster.start_worker(1)
            wait_for(lambda: executors_granted(cluster) == 2, 180, "a new executor granted")
            time.sleep(10)
            run.finish(spark)
        finally:
            code = run.close()
    assert code == 0, run.apps[-1].tail()
    # The kill reached the application: Spark's scheduler lost the executor (and so ran its
    # work elsewhere), and the application went on without a restart.
    lost = [line for line in run.apps[0].lines() if "Lost executor" in line]
    assert lost, "the application never lost an executor"
    print(f"worker test: {lost[0].strip()[:200]}", flush=True)
    run.verify(spark)
    assert run.runs.starts == 1, run.runs.report()
    print(
        f"worker test: {time.monotonic() - began:.0f} s, {len(run.sent)} transactions",
        flush=True,
    )
