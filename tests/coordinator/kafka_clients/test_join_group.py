"""kafka-python collects a group join that ended between two polls (coordinator/kafka_clients/
join_group.py). A real broker and a real kafka-python consumer, polled as a loaded host polls
it: each poll gives up before the join's round trips end, and the next comes later."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaConsumer
from kafka.coordinator.base import BaseCoordinator

from coordinator.kafka_clients.admin import ensure_topic
from coordinator.kafka_clients.join_group import install
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.runtime.local_stack.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka


def test_a_join_that_ends_between_two_polls_is_kept_not_sent_again(
    kafka_broker: KafkaBroker,
) -> None:
    """Without the mend every poll sent a new JoinGroup and dropped the ended one: a lone
    leader began a new generation at each poll and was never assigned anything."""
    topic = f"join-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker.bootstrap_servers, topic)
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id=f"join-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        **kafka_python_options(),
    )
    consumer.subscribe([topic])
    try:
        generations = []
        deadline = time.monotonic() + 30
        while not consumer.assignment():
            assert time.monotonic() < deadline, (
                f"never assigned in 30 s: {len(set(generations))} generations began"
            )
            consumer.poll(timeout_ms=0)  # gives up on the join at once: it ends meanwhile
            generations.append(consumer._coordinator._generation.generation_id)
            time.sleep(0.3)
        joined = consumer._coordinator._generation.generation_id
        for _ in range(5):  # stays in that generation: nothing sends a JoinGroup again
            consumer.poll(timeout_ms=0)
            time.sleep(0.3)
        assert consumer._coordinator._generation.generation_id == joined
        assert consumer.assignment()
    finally:
        consumer.close(autocommit=False)


def test_install_wraps_once() -> None:
    install()
    wrapped = BaseCoordinator.join_group_async
    install()
    assert BaseCoordinator.join_group_async is wrapped
