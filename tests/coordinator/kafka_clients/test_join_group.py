"""kafka-python completes a group join that outlives the poll that began it (coordinator/
kafka_clients/join_group.py). A real broker and a real kafka-python consumer, polled as a loaded
host polls it: each poll gives up before the join's round trips end, and the next comes later."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.coordinator.base import BaseCoordinator

from coordinator.kafka_clients.admin import ensure_topic
from coordinator.kafka_clients.join_group import install
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.runtime.local_stack.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka


def member_of_a_new_group(kafka_broker: KafkaBroker, topic: str) -> KafkaConsumer:
    """Return a consumer of `topic` in a group of its own, with the product's session (6 s)."""
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap_servers,
        group_id=f"join-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=1000,
        allow_auto_create_topics=False,  # a topic not there yet stays away until made
        **kafka_python_options(),
    )
    consumer.subscribe([topic])
    return consumer


def test_a_join_that_ends_between_two_polls_is_kept_not_sent_again(
    kafka_broker: KafkaBroker,
) -> None:
    """Without the mend every poll sent a new JoinGroup and dropped the ended one: a lone
    leader began a new generation at each poll and was never assigned anything."""
    topic = f"join-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka_broker.bootstrap_servers, topic)
    consumer = member_of_a_new_group(kafka_broker, topic)
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


def test_a_rejoin_begun_by_a_new_topic_is_completed_by_the_polls_after_it(
    kafka_broker: KafkaBroker,
) -> None:
    """Without the mend the leader's own assignment, made inside the join, ended kafka-python's
    wish to rejoin: no later poll collected the join, the heartbeat stopped for it never
    resumed, and the member stood assigned nothing for good (the bench's consumer received
    none of 200; here: generation 2 joined, never synced, rebalancing for good)."""
    topic = f"rejoin-{uuid.uuid4().hex[:8]}"  # not there yet: generation 1 has no partition
    consumer = member_of_a_new_group(kafka_broker, topic)
    coordinator = consumer._coordinator

    def poll_until(done: Any, what: str) -> None:
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, (
                f"{what} not in 30 s: generation {coordinator._generation.generation_id}, "
                f"state {coordinator.state}, join task set: {coordinator._join_task is not None}"
            )
            consumer.poll(timeout_ms=0)  # gives up on the join at once
            time.sleep(0.1)

    try:
        poll_until(lambda: coordinator._generation.generation_id >= 1, "the first join")
        assert not consumer.assignment()
        ensure_topic(kafka_broker.bootstrap_servers, topic)  # the metadata change: a rejoin
        poll_until(
            lambda: consumer.assignment() == {TopicPartition(topic, 0)}, "the partition assigned"
        )
        joined = coordinator._generation.generation_id
        assert joined >= 2
        # The heartbeat resumed: past a session timeout the member is still in its generation
        # (a member the broker dropped would join a new one).
        until = time.monotonic() + 7
        while time.monotonic() < until:
            consumer.poll(timeout_ms=0)
            time.sleep(0.1)
        assert coordinator._generation.generation_id == joined
        assert consumer.assignment() == {TopicPartition(topic, 0)}
    finally:
        consumer.close(autocommit=False)


def test_install_wraps_once() -> None:
    install()
    wrapped = BaseCoordinator.join_group_async, BaseCoordinator.need_rejoin
    install()
    assert (BaseCoordinator.join_group_async, BaseCoordinator.need_rejoin) == wrapped
