"""contract 7.1 on the cluster profile: each part of it dies under load, one at a time.

The deployment a user goes to production with, on loopback, every part a real process:

- three KRaft nodes of the test's own (tests/conftest.py `cluster`): the ingress and check
  topics with three replicas and `min.insync.replicas` 2;
- the warehouse and the stream checkpoints in a bucket of an S3 API (moto's server,
  `s3a://`), reached through the standard AWS_* variables: Spark's s3a file system for the
  checkpoints, the state and table creation, delta-rs (conditional PUT) for the batch commits;
- a Spark standalone master with two workers (one core each,
  coordinator/runtime/local_stack/spark_cluster.py), the coordinator submitted to it with
  `deploy/submit-coordinator`, one executor per worker.

The crash test's mixed load (tests/guarantees/mixed_load.py: commits, rollbacks, checked and
never-answered transactions, malformed records) runs throughout, and the faults come one at a
time, each at a random moment:

1. SIGKILL of the node leading the half topic's partition 0, started again 15 s later: the
   load and the coordinator go on through the other two (leadership moves);
2. SIGKILL of worker 1 with its executor (a lost machine), started again once the driver
   has logged the executor lost (and a few seconds more): Spark runs the lost tasks on the
   other executor, which loads their state from the checkpoint on S3, and the master grants
   a new executor;
3. SIGKILL of the driver, then the documented restart;
4. the S3 server stops answering for 10 s (SIGSTOP: a partition from the object store).

Then every invariant of the crash test must hold. The coordinator must ride through 1, 2 and
4 by itself: any exit of its own is printed, and at most one is accepted (its reason must
name the lost broker or the unreachable store) so that a regression shows as a failure.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.runtime.local_stack.kafka_cluster import KafkaCluster
from coordinator.runtime.local_stack.s3_server import S3Server
from coordinator.runtime.local_stack.spark_cluster import ClusterError, StandaloneCluster
from streams.checkpoint.checkpoint_files import files_of
from tests.app_process import AppProcess
from tests.conftest import unavailable
from tests.guarantees.app_runs import AppRuns
from tests.guarantees.mixed_load import Scenario, settings_of
from tests.harness import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

APP_NAME = "txcoord-coordinator"
#: One executor per worker, each the worker's one core.
EXECUTORS = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"}
#: Seconds a killed broker node stays away (the load goes on meanwhile).
AWAY = 15
#: What the driver logs once its scheduler knows an executor is gone.
LOST_EXECUTOR = "Lost executor"
#: What a coordinator may stop with while its object store does not answer: the store's
#: client gave up, by the exceptions' full names (s3a and the AWS SDK under it; delta-rs's
#: object_store, which says "Generic S3 error" and why), and the documented restart resumes
#: it. Matched against the application's error only (tests/guarantees/app_runs.py): the
#: old substrings (`s3a`, `amazon`, `timed out`) were in nearly every error on S3.
STORE_UNREACHABLE = (
    r"\borg\.apache\.hadoop\.fs\.s3a\.AWSClientIOException\b"
    r"|\bsoftware\.amazon\.awssdk\.core\.exception\.(SdkClientException"
    r"|ApiCallTimeoutException|ApiCallAttemptTimeoutException)\b"
    r"|\bjava\.net\.(SocketTimeoutException|ConnectException)\b"
    r"|Generic S3 error: [^|]*(timed out|error sending request|connection)"
)


def kill_leader(cluster: KafkaCluster, topic: str, runs: AppRuns) -> None:
    """SIGKILL the node leading `topic`'s partition 0; start it again after AWAY seconds."""
    leader = cluster.leader_of(topic)
    runs.broker_killed = True  # from now on a lost broker is an acceptable exit reason
    cluster.kill(leader)
    print(f"cluster test: killed node {leader}, leader of {topic}-0", flush=True)
    time.sleep(AWAY)
    cluster.start_node(leader)


def lost_executors(app: AppProcess) -> int:
    """Return how many times `app`'s driver has logged an executor lost so far."""
    return sum(LOST_EXECUTOR in line for line in app.lines())


def executors_granted(spark_cluster: StandaloneCluster) -> int:
    """Return the cores the master grants the running application now."""
    running = [a for a in spark_cluster.applications(APP_NAME) if a["state"] == "RUNNING"]
    return int(running[0]["cores"]) if running else 0


@pytest.mark.timeout(2400)
def test_each_part_of_the_cluster_profile_dies_under_load_and_nothing_is_lost_or_doubled(
    *,
    spark: SparkSession,
    cluster: KafkaCluster,
    s3_api: S3Server,
    s3_warehouse: str,
    tmp_path: Path,
    rng: random.Random,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    began = time.monotonic()
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver on loopback, as the cluster
    s3_api.configure(spark)  # the test reads the tables back through s3a too
    bucket = s3_warehouse.rsplit("/", 1)[0]
    settings = settings_of(
        cluster.bootstrap_servers,
        tmp_path,
        warehouse=s3_warehouse,
        **{
            "streams.checkpoint_dir": f"{bucket}/checkpoints",
            "kafka.replication_factor": "3",
            "kafka.min_insync_replicas": "2",
        },
    )
    try:
        workers = StandaloneCluster(tmp_path / "spark", cores=1, memory="1536m", workers=2)
        workers.start()
    except ClusterError as exc:
        unavailable("Spark standalone cluster", exc)
    with workers:  # kills master, workers and executors; prints their logs on a failure
        run = Scenario(
            settings,
            rng,
            acceptable=(STORE_UNREACHABLE,),
            master=workers.master_url,
            spark_conf=EXECUTORS,
        )
        try:
            wait_for(lambda: executors_granted(workers) == 2, 120, "two executors granted")
            time.sleep(rng.uniform(5, 12))
            kill_leader(cluster, run.config.kafka.half_topic, run.runs)

            time.sleep(rng.uniform(5, 10))
            driver = run.apps[-1]
            losses = lost_executors(driver)
            workers.kill_worker(1)
            print("cluster test: killed worker 1 and its executor", flush=True)
            # Away until the driver knows (its scheduler then runs the lost tasks on the
            # other executor), then a few seconds more of work on that one alone: a positive
            # marker instead of a fixed 20 s, which was mostly waiting after the loss.
            wait_for(
                lambda: lost_executors(driver) > losses,
                120,
                "the driver to lose worker 1's executor",
            )
            time.sleep(rng.uniform(3, 6))
            workers.start_worker(1)
            wait_for(lambda: executors_granted(workers) == 2, 180, "a new executor granted")

            time.sleep(rng.uniform(3, 8))
            run.alive("after the worker's death").kill9()
            print("cluster test: killed the driver", flush=True)
            run.start()

            # After the restart said it runs (its first batches under the load): a random
            # moment of the batch cycle, a few batches wide.
            time.sleep(rng.uniform(5, 12))
            os.kill(s3_api.process.pid, signal.SIGSTOP)
            print("cluster test: the S3 server stops answering for 10 s", flush=True)
            try:
                time.sleep(10)
            finally:
                os.kill(s3_api.process.pid, signal.SIGCONT)
            # 5 s more of load (10 transactions) lands after the outage; `finish` then waits
            # for every one of them to be decided, which the coordinator must do past it.
            time.sleep(5)
            run.finish()
        finally:
            code = run.close()
    assert code == 0, run.apps[-1].tail()
    # The worker's death reached the application: Spark's scheduler lost the executor (and
    # so ran its work elsewhere) without the driver restarting.
    lost = [line for line in run.apps[0].lines() if LOST_EXECUTOR in line]
    assert lost, "the application never lost an executor"
    run.verify(spark)
    # Everything lived in the bucket: the tables (read back above through s3a) and the
    # checkpoints; nothing under the test's local folder.
    assert files_of(f"{bucket}/checkpoints", spark).names(), "no checkpoint on S3"
    assert not (tmp_path / "warehouse").exists() and not (tmp_path / "checkpoints").exists()
    assert len(run.runs.unplanned) <= 1, run.runs.report()
    print(
        f"cluster test: {time.monotonic() - began:.0f} s, {len(run.sent)} transactions, "
        f"{run.runs.starts} starts, {len(run.runs.unplanned)} unplanned",
        flush=True,
    )
