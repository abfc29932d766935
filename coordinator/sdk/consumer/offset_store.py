"""The committed offsets of consumer groups: a compacted Kafka topic, newest per queue.

A record's key is `[group, topic, queue]` (JSON), its value the group's committed offset of
that queue, the first offset not acknowledged (`{"offset": N, "member": ..., "at": ms}`);
compaction keeps the newest per key for ever. All records of a group go to one partition
(crc32 of its name), so a member loads its group's offsets by reading that partition, not
the topic. The coordinator stays the warehouse's only writer: consumers write only here.

Which topic (coordinator/core/topics.py `offsets_topic`): in the shared layout one topic,
`[kafka] consumer_offsets_topic`, which every consumer group writes, so any principal that may
write it can move any group's offsets. In the per-group layout (`per_group`, the `[kafka]
topics_per_group` of a secured deployment) each consumer group has its own,
`<consumer_offsets_topic>.<group>`, and the broker's ACLs let only that group's principal
write it (`consumer_grants`). There the topic is the proof: a record in group A's topic that
names group B is A's doing and counts for nobody. No client creates an offsets topic by
writing to it (a broker that creates topics on first use would make it uncompacted):
coordinator/kafka_clients/offsets_topic.py says who does.

Last write wins. A member that lost a queue in a rebalance and commits once more may move
its offset back (its acknowledged messages are delivered again: at least once), never past
a message nobody acknowledged.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import TopicLayout
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.protocol.deliveries import whole

__all__ = ["OffsetStore", "Stored"]

#: How long a commit may take before it fails.
COMMIT_TIMEOUT_SECONDS = 30.0
#: How long loading may take before it fails.
LOAD_TIMEOUT_SECONDS = 60.0

Queue = tuple[str, int]


class OffsetStore:
    """Committed offsets under `topic` (the `[kafka] consumer_offsets_topic`): that topic, or
    with `per_group` each consumer group's own topic of that prefix (module docstring).

    With `group`, the store checks at once that the group's topic exists (a member's store);
    without, the shared topic in the shared layout (an operator's, for every group).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        security: KafkaSecurity | None = None,
        *,
        per_group: bool = False,
        group: str | None = None,
    ) -> None:
        self.layout = TopicLayout(offsets=topic, per_group=per_group)
        self._bootstrap_servers = bootstrap_servers
        self._options = kafka_python_options(security)
        self._partitions: dict[str, int] = {}
        # Never created by a client: a broker that creates topics on first use would make one
        # uncompacted (coordinator/kafka_clients/offsets_topic.py).
        self._reader = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            client_id="txcoord-consumer-offsets-reader",
            allow_auto_create_topics=False,
            **self._options,
        )
        self._producer: KafkaProducer | None = None
        try:
            if group is not None:
                self._partition_count(self.topic_of(group))
            elif not per_group:
                self._partition_count(topic)
        except BaseException:
            self._reader.close()
            raise

    def topic_of(self, group: str) -> str:
        """Return the topic holding `group`'s offsets (ValueError: a name no topic can hold)."""
        return self.layout.offsets_topic(group)

    def partition(self, group: str) -> int:
        """Return the partition holding `group`'s offsets."""
        return zlib.crc32(group.encode()) % self._partition_count(self.topic_of(group))

    def load(self, group: str) -> dict[Queue, int]:
        """Return `group`'s committed offset of every queue it ever committed."""
        topic = self.topic_of(group)
        stored = self._read({TopicPartition(topic, self.partition(group)): group})
        return {queue: entry.offset for queue, entry in stored.get(group, {}).items()}

    def every_group(self) -> dict[str, dict[Queue, Stored]]:
        """Return every group's committed offsets, with who stored each and when.

        In the per-group layout: every offsets topic this principal sees, each read for the
        group it is named after only.
        """
        if not self.layout.per_group:
            topic = self.layout.offsets
            count = self._partition_count(topic)
            return self._read({TopicPartition(topic, p): None for p in range(count)})
        owners = {}
        for topic in sorted(self._reader.topics()):
            group = self.layout.offsets_group_of(topic)
            if group is not None:
                count = self._partition_count(topic)
                owners.update({TopicPartition(topic, p): group for p in range(count)})
        return self._read(owners)

    def _read(self, owners: Mapping[TopicPartition, str | None]) -> dict[str, dict[Queue, Stored]]:
        """Read `owners`' partitions to their end; keep the newest entry per key, of the
        partition's group only (None: of any group)."""
        if not owners:
            return {}
        parts = list(owners)
        self._reader.assign(parts)
        for part in parts:
            self._reader.seek_to_beginning(part)
        ends = self._reader.end_offsets(parts)
        found: dict[str, dict[Queue, Stored]] = {}
        deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
        while any(self._reader.position(part) < ends[part] for part in parts):
            if time.monotonic() > deadline:
                topics = ", ".join(sorted({part.topic for part in parts}))
                raise TimeoutError(f"reading the consumer offsets in {topics} took too long")
            for part, records in self._reader.poll(timeout_ms=500).items():
                owner = owners.get(part)
                for record in records:
                    entry = _decode(record.key, record.value)
                    if entry is not None and owner in (None, entry.group):
                        found.setdefault(entry.group, {})[entry.topic, entry.queue_id] = entry
        return found

    def commit(self, group: str, member: str, offsets: Mapping[Queue, int]) -> None:
        """Store `offsets` as `group`'s committed offsets; raise if Kafka does not take them."""
        if not offsets:
            return
        topic = self.topic_of(group)
        partition = self.partition(group)
        producer = self._writer()
        now = time.time_ns() // 1_000_000
        futures = [
            producer.send(
                topic,
                key=json.dumps([group, queue_topic, queue]).encode(),
                value=json.dumps({"offset": offset, "member": member, "at": now}).encode(),
                partition=partition,
            )
            for (queue_topic, queue), offset in sorted(offsets.items())
        ]
        for future in futures:
            future.get(timeout=COMMIT_TIMEOUT_SECONDS)

    def close(self) -> None:
        """Release the producer and the reader."""
        if self._producer is not None:
            self._producer.close(timeout=5)
        self._reader.close()

    def _writer(self) -> KafkaProducer:
        """Return the producer, made at the first commit (an operator's listing writes none)."""
        if self._producer is None:
            self._producer = KafkaProducer(
                bootstrap_servers=self._bootstrap_servers,
                acks="all",
                client_id="txcoord-consumer-offsets",
                allow_auto_create_topics=False,
                **self._options,
            )
        return self._producer

    def _partition_count(self, topic: str) -> int:
        """Return how many partitions `topic` has; ValueError if it is not there."""
        if topic not in self._partitions:
            partitions = self._reader.partitions_for_topic(topic)
            if not partitions:
                raise ValueError(self._missing(topic))
            self._partitions[topic] = len(partitions)
        return self._partitions[topic]

    def _missing(self, topic: str) -> str:
        """Return what to do about offsets topic `topic` not being there."""
        group = self.layout.offsets_group_of(topic)
        if group is None:
            return (
                f"Kafka topic {topic} does not exist: start the coordinator first (in the "
                "per-group layout, [kafka] topics_per_group, it makes none: pass "
                "topics_per_group=True, and each consumer group uses an offsets topic of its own)"
            )
        return (
            f"Kafka topic {topic}, the offsets of consumer group {group!r}, does not exist (or "
            "this principal may not see it): in the per-group layout a consumer group's "
            f"offsets topic is made beforehand, by `txcoord provision --consumer-group {group}` "
            "(the REST ingress makes its own consumer groups'), never by a client's first write"
        )


@dataclass(frozen=True)
class Stored:
    """One committed offset as stored: whose, which queue, where, by whom, when."""

    group: str
    topic: str
    queue_id: int
    offset: int
    member: str
    at_ms: int


def _decode(key: bytes | None, value: bytes | None) -> Stored | None:
    """Return the entry one record holds, or None if it is not one."""
    try:
        group, topic, queue = json.loads(key or b"")
        doc: Any = json.loads(value or b"")
        return Stored(
            str(group),
            str(topic),
            whole(queue),
            whole(doc["offset"]),
            str(doc.get("member", "")),
            whole(doc.get("at", 0)),
        )
    except (ValueError, TypeError, KeyError):
        return None
