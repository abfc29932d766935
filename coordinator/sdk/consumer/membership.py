"""A consumer group's live members, from Kafka's group protocol; and the delivery notices.

Every member of txcoord consumer group G joins Kafka consumer group `txcoord-consumer-G` on
the deliveries topic. Kafka's group coordinator does what RocketMQ's broker does for its
consumers: it knows who is alive (a member that stops heartbeating is out after the
session timeout, SESSION_TIMEOUT_MS) and starts a new generation when one joins or leaves.
The assignor below gives every member the deliveries topic's partition (every member reads
every notice) and the sorted list of the generation's member names; each member then takes
its own share of each topic's queues (coordinator/sdk/consumer/allocation.py).

Nothing is committed to Kafka's offsets for the deliveries topic: notices are hints, read
from the newest on (the group's committed queue offsets are the offsets topic's:
coordinator/sdk/consumer/offset_store.py). A secured broker lets a consumer group's principal
read the deliveries topic and join its own Kafka group only (coordinator/core/topics.py
`consumer_grants`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.abstract import (
    AbstractPartitionAssignor,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
)

from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import consumer_kafka_group
from coordinator.kafka_clients.options import COMMITTED_ONLY, kafka_python_options
from coordinator.protocol.deliveries import Notice, decode_notice

log = logging.getLogger(__name__)

__all__ = ["SESSION_TIMEOUT_MS", "GroupMembership", "kafka_group_id"]

#: A member silent this long is out of the group, and its queues go to the others: Kafka's
#: smallest session timeout by default (group.min.session.timeout.ms).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000


def kafka_group_id(group: str) -> str:
    """Return the Kafka consumer group the members of txcoord consumer group `group` join
    (named in coordinator/core/topics.py, where its ACL is granted too)."""
    return consumer_kafka_group(group)


class MembersAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """Give every member every subscribed partition and the generation's member names."""

    name = "txcoord-members"
    version = 0

    def __init__(self, member: str) -> None:
        self.member = member
        self.members: tuple[str, ...] = ()
        self.generation = -1
        #: Joins completed so far. A follower that rejoins a stable group is given the same
        #: generation back (Kafka's coordinator answers with the current one), so only this
        #: count tells that a join began by the revoke callback has ended.
        self.assignments = 0

    def assign(self, cluster: Any, members: Any) -> dict[str, Any]:
        """Return each member's assignment (run by the generation's leader)."""
        names = sorted({bytes(m.metadata.user_data or b"").decode() for m in members})
        data = json.dumps(names).encode()
        result = {}
        for member in members:
            partitions = [
                (topic, sorted(cluster.partitions_for_topic(topic) or ()))
                for topic in sorted(member.metadata.topics)
            ]
            result[member.member_id] = ConsumerProtocolAssignment(self.version, partitions, data)
        return result

    def metadata(self, topics: Any) -> Any:
        """Return this member's subscription, carrying its name."""
        return ConsumerProtocolSubscription(self.version, sorted(topics), self.member.encode())

    def on_assignment(self, assignment: Any, generation: int) -> None:
        """Keep the generation's member names (called on every member)."""
        try:
            self.members = tuple(json.loads(bytes(assignment.user_data or b"[]")))
        except ValueError:  # another assignor's bytes: this member alone
            self.members = (self.member,)
        self.generation = generation
        self.assignments += 1
        log.info("consumer group generation %d: %d member(s)", generation, len(self.members))


class GroupMembership:
    """Member `member` of consumer group `group`, reading the notices of `deliveries_topic`."""

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        member: str,
        *,
        deliveries_topic: str,
        security: KafkaSecurity | None = None,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        listener: ConsumerRebalanceListener | None = None,
    ) -> None:
        """Join (at the first `poll`); `listener` hears of each rebalance (kafka-python's)."""
        self.member = member
        self._assignor = MembersAssignor(member)
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=kafka_group_id(group),
            client_id=member,
            enable_auto_commit=False,
            auto_offset_reset="latest",
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=min(HEARTBEAT_INTERVAL_MS, session_timeout_ms // 3),
            partition_assignment_strategy=[self._assignor],
            allow_auto_create_topics=False,  # the coordinator creates it
            **COMMITTED_ONLY,  # a fenced coordinator's notices are aborted
            **kafka_python_options(security),
        )
        self._consumer.subscribe([deliveries_topic], listener=listener)

    @property
    def members(self) -> tuple[str, ...]:
        """Return the names of the current generation's members (empty before joining)."""
        return self._assignor.members

    @property
    def generation(self) -> int:
        """Return the current generation (-1 before joining)."""
        return self._assignor.generation

    @property
    def assignments(self) -> int:
        """Return how many joins have completed (each rebalance's, and a rejoin's that kept
        the generation)."""
        return self._assignor.assignments

    def poll(self, timeout_seconds: float) -> list[Notice]:
        """Wait up to `timeout_seconds` for notices (and take part in the group meanwhile)."""
        batches = self._consumer.poll(timeout_ms=max(0, int(timeout_seconds * 1000)))
        notices = []
        for records in batches.values():
            for record in records:
                notice = decode_notice(record.value)
                if notice is not None:
                    notices.append(notice)
        return notices

    def close(self) -> None:
        """Leave the group at once (the others get this member's queues without waiting for
        the session timeout)."""
        self._consumer.close(autocommit=False)
