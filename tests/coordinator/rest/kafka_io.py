"""Read what the REST wrote: every record of a topic, and where each partition ends."""

from __future__ import annotations

import time
from typing import Any

from kafka import KafkaConsumer, TopicPartition


def _consumer(bootstrap_servers: str) -> Any:
    return KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)


def end_offsets(bootstrap_servers: str, topic: str) -> dict[int, int]:
    """Return {partition: end offset} of `topic`."""
    consumer = _consumer(bootstrap_servers)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def read_all(bootstrap_servers: str, topic: str, timeout: float = 30) -> list[Any]:
    """Return every record of `topic` (all partitions, from the beginning, up to the end)."""
    consumer = _consumer(bootstrap_servers)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        ends = consumer.end_offsets(partitions)
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {topic} to its end in {timeout}s")
            for batch in consumer.poll(timeout_ms=500).values():
                records += [r for r in batch if r.offset < ends[TopicPartition(topic, r.partition)]]
        return records
    finally:
        consumer.close()


class OffsetWatch:
    """Keep one consumer open to read the end offsets of some topics quickly, again and again."""

    def __init__(self, bootstrap_servers: str, topics: list[str]) -> None:
        self._consumer = _consumer(bootstrap_servers)
        self._partitions = [
            TopicPartition(topic, p)
            for topic in topics
            for p in sorted(self._consumer.partitions_for_topic(topic))
        ]

    def snapshot(self) -> dict[tuple[str, int], int]:
        """Return {(topic, partition): end offset}."""
        ends = self._consumer.end_offsets(self._partitions)
        return {(tp.topic, tp.partition): offset for tp, offset in ends.items()}

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()
