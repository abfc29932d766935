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

from coordinator.core.config import load_config
from coordinator.runtime.local_stack.kafka_cluster import KafkaCluster
from tests.guarantees.app_runs import AppRuns
from tests.guarantees.mixed_load import Load, alive, answer, drain, kind_of, settings_of, verify
from tests.harness import Responder

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
    settings = settings_of(
        cluster.bootstrap_servers,
        tmp_path,
        **{"kafka.replication_factor": "3", "kafka.min_insync_replicas": "2"},
    )
    config = load_config(overrides=settings)
    runs = AppRuns(settings)
    apps = [runs.start()]
    load = Load(config, rate=2, rng=random.Random(rng.random()))
    responder = Responder(config, answer)
    try:
        time.sleep(rng.uniform(5, 12))
        kill_leader(cluster, config.kafka.half_topic, runs)
        time.sleep(rng.uniform(5, 10))
        kill_leader(cluster, config.kafka.op_topic, runs)
        time.sleep(rng.uniform(3, 8))
        app = alive(runs, apps[-1], "after the brokers' deaths")
        app.kill9()  # at a random moment
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
                app.kill9()
        code = apps[-1].terminate() if apps[-1].process.poll() is None else -1
        print(runs.report(), flush=True)
    assert code == 0, apps[-1].tail()
    verify(spark, config, sent, load, responder)
    assert len(runs.unplanned) <= 1, runs.report()
    print(
        f"cluster test: {time.monotonic() - began:.0f} s, {len(sent)} transactions, "
        f"{runs.starts} starts, {len(runs.unplanned)} unplanned",
        flush=True,
    )
