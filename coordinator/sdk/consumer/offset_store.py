"""The committed offsets of consumer groups: one compacted Kafka topic, newest per queue.

A record's key is `[group, topic, queue]` (JSON), its value the group's committed offset of
that queue, the first offset not acknowledged (`{"offset": N, "member": ..., "at": ms}`);
compaction keeps the newest per key for ever. All records of a group go to one partition
(crc32 of its name), so a member loads its group's offsets by reading that partition, not
the topic. The coordinator stays the warehouse's only writer: consumers write only here.

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
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.protocol.deliveries import whole

__all__ = ["OffsetStore", "Stored"]

#: How long a commit may take before it fails.
COMMIT_TIMEOUT_SECONDS = 30.0
#: How long loading may take before it fails.
LOAD_TIMEOUT_SECONDS = 60.0

Queue = tuple[str, int]


class OffsetStore:
    """Committed offsets in `topic` (the `[kafka] consumer_offsets_topic`)."""

    def __init__(
        self, bootstrap_servers: str, topic: str, security: KafkaSecurity | None = None
    ) -> None:
        self.topic = topic
        options = kafka_python_options(security)
        # Never created by a client: a broker that creates topics on first use would make this
        # one uncompacted (the coordinator creates it, streams/delivery_notices.py).
        self._reader = KafkaConsumer(
            bootstrap_servers=bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            client_id="txcoord-consumer-offsets-reader",
            allow_auto_create_topics=False,
            **options,
        )
        partitions = self._reader.partitions_for_topic(topic)
        if not partitions:
            self._reader.close()
            raise ValueError(f"Kafka topic {topic} does not exist: start the coordinator first")
        self._partitions = len(partitions)
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap_servers,
            acks="all",
            client_id="txcoord-consumer-offsets",
            allow_auto_create_topics=False,
            **options,
        )

    def partition(self, group: str) -> int:
        """Return the partition holding `group`'s offsets."""
        return zlib.crc32(group.encode()) % self._partitions

    def load(self, group: str) -> dict[Queue, int]:
        """Return `group`'s committed offset of every queue it ever committed."""
        stored = self._read([self.partition(group)], group)
        return {queue: entry.offset for queue, entry in stored.get(group, {}).items()}

    def every_group(self) -> dict[str, dict[Queue, Stored]]:
        """Return every group's committed offsets, with who stored each and when."""
        return self._read(list(range(self._partitions)), None)

    def _read(self, partitions: list[int], group: str | None) -> dict[str, dict[Queue, Stored]]:
        """Read `partitions` to their end; keep the newest entry per key (of `group` only)."""
        parts = [TopicPartition(self.topic, p) for p in partitions]
        self._reader.assign(parts)
        for part in parts:
            self._reader.seek_to_beginning(part)
        ends = self._reader.end_offsets(parts)
        found: dict[str, dict[Queue, Stored]] = {}
        deadline = time.monotonic() + LOAD_TIMEOUT_SECONDS
        while any(self._reader.position(part) < ends[part] for part in parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading the consumer offsets in {self.topic} took too long")
            for records in self._reader.poll(timeout_ms=500).values():
                for record in records:
                    entry = _decode(record.key, record.value)
                    if entry is not None and group in (None, entry.group):
                        found.setdefault(entry.group, {})[entry.topic, entry.queue_id] = entry
        return found

    def commit(self, group: str, member: str, offsets: Mapping[Queue, int]) -> None:
        """Store `offsets` as `group`'s committed offsets; raise if Kafka does not take them."""
        if not offsets:
            return
        partition = self.partition(group)
        now = time.time_ns() // 1_000_000
        futures = [
            self._producer.send(
                self.topic,
                key=json.dumps([group, topic, queue]).encode(),
                value=json.dumps({"offset": offset, "member": member, "at": now}).encode(),
                partition=partition,
            )
            for (topic, queue), offset in sorted(offsets.items())
        ]
        for future in futures:
            future.get(timeout=COMMIT_TIMEOUT_SECONDS)

    def close(self) -> None:
        """Release the producer and the reader."""
        self._producer.close(timeout=5)
        self._reader.close()


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
