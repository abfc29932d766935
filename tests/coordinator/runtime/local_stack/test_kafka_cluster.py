"""The three-node local cluster: replicated topics, and acks=all writes through a leader's death.

Real brokers (the install step's jars). A topic made with three replicas and
`min.insync.replicas` 2 keeps taking acknowledged writes while its leader is killed with
SIGKILL; nothing acknowledged is lost, and the killed node rejoins the in-sync replicas.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from coordinator.runtime.local_stack.kafka_cluster import ClusterSettings, KafkaCluster

pytestmark = pytest.mark.kafka

TOPIC = "replicated"


def test_settings_refuse_an_even_cluster(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="odd number"):
        ClusterSettings(tmp_path, nodes=4)


def test_acknowledged_writes_survive_the_leader_being_killed(cluster: KafkaCluster) -> None:
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks="all", retries=20, linger_ms=0
    )
    acknowledged: list[bytes] = []

    def send(n: int) -> None:
        value = f"m-{n}".encode()
        producer.send(TOPIC, value).get(60)
        acknowledged.append(value)

    for n in range(50):
        send(n)
    leader = cluster.leader_of(TOPIC)
    cluster.kill(leader)
    for n in range(50, 100):  # a new leader takes over; acks=all still needs two replicas
        send(n)
    assert cluster.leader_of(TOPIC) != leader
    cluster.start_node(leader)
    deadline = time.monotonic() + 60
    while cluster.in_sync(TOPIC) != [1, 2, 3] and time.monotonic() < deadline:
        time.sleep(1)
    assert cluster.in_sync(TOPIC) == [1, 2, 3], "the killed node did not catch up"
    producer.close()

    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers, auto_offset_reset="earliest"
    )
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    seen: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(acknowledged) and time.monotonic() < deadline:
        for records in consumer.poll(1000).values():
            seen += [record.value for record in records]
    consumer.close()
    assert seen == acknowledged  # all of them, once each, in order
