"""contract 7.1 on a replicated Kafka: brokers die under load, then the coordinator does.

Three KRaft nodes of the test's own (tests/conftest.py `cluster`): the ingress and check
topics are made with three replicas and `min.insync.replicas` 2, as in production. The mixed
load of the crash test runs throughout (tests/guarantees/mixed_load.py), against the real
application (`deploy/submit-coordinator`), one fault at a time:

1. SIGKILL of the node leading the half topic's partition 0: the load and the coordinator go
   on through the other two (leadership moves), and the node is started again 15 s later;
2. the same for the node then leading the op topic's partition 0;
3. SIGKILL of the coordinator at a random moment, then a restart (the documented one).

Then every invariant of the crash test must hold. The coordinator is expected to ride through
a broker's death by itself: any exit of its own is printed, and at most one is accepted (its
reason must name the lost broker) so that a regression shows as a failure, not a restart.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.runtime.local_stack.kafka_cluster import KafkaCluster
from tests.guarantees.app_runs import AppRuns
from tests.guarantees.mixed_load import Scenario, settings_of

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long(4)]

#: Seconds a killed node stays away (the load goes on meanwhile).
AWAY = 15


def kill_leader(cluster: KafkaCluster, topic: str, runs: AppRuns) -> None:
    """SIGKILL the node leading `topic`'s partition 0; start it again after AWAY seconds."""
    leader = cluster.leader_of(topic)
    runs.broker_killed = True  # from now on a lost broker is an acceptable exit reason
    cluster.kill(leader)
    print(f"cluster test: killed node {leader}, leader of {topic}-0", flush=True)
    time.sleep(AWAY)
    cluster.start_node(leader)


@pytest.mark.timeout(2400)
def test_broker_and_coordinator_deaths_on_a_replicated_cluster_lose_and_double_nothing(
    spark: SparkSession, cluster: KafkaCluster, tmp_path: Path, rng: random.Random
) -> None:
    began = time.monotonic()
    replicated = {"kafka.replication_factor": "3", "kafka.min_insync_replicas": "2"}
    run = Scenario(settings_of(cluster.bootstrap_servers, tmp_path, **replicated), rng)
    try:
        time.sleep(rng.uniform(5, 12))
        kill_leader(cluster, run.config.kafka.half_topic, run.runs)
        time.sleep(rng.uniform(5, 10))
        kill_leader(cluster, run.config.kafka.op_topic, run.runs)
        time.sleep(rng.uniform(3, 8))
        run.alive("after the brokers' deaths").kill9()  # at a random moment
        run.start()
        time.sleep(10)
        run.finish(spark)
    finally:
        code = run.close()
    assert code == 0, run.apps[-1].tail()
    run.verify(spark)
    assert len(run.runs.unplanned) <= 1, run.runs.report()
    print(
        f"cluster test: {time.monotonic() - began:.0f} s, {len(run.sent)} transactions, "
        f"{run.runs.starts} starts, {len(run.runs.unplanned)} unplanned",
        flush=True,
    )
