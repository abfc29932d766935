"""Long polls on the check topic: one Kafka consumer per producer group, shared by its pollers.

The coordinator publishes each check request (RocketMQ's CHECK_TRANSACTION_STATE) on the
check topic with header `txcoord.producer_group` (streams/coordinator_writer.py). For a group
G the REST keeps one consumer in Kafka consumer group `txcoord-rest-G`, which reads the
whole topic (in the per-group layout G's own check topic, coordinator/core/topics.py) and hands out
only G's records. Pollers of G share that consumer one at a time, so each request reaches
one of them; several REST processes share the Kafka consumer group, so they split the
partitions. A new group starts at the earliest offset: a check request
published before the first poll is not missed.

Offsets are committed once the records are collected for an answer. A crash between the
commit and the answer loses those requests for this round only: the coordinator checks an
unresolved transaction again every transaction_check_interval (RocketMQ does the same).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kafka import KafkaConsumer
from kafka import errors as kafka_errors

from coordinator.core.errors import KafkaUnavailableError
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import TopicLayout
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.kafka_clients.producer import BOOTSTRAP_TIMEOUT_MS
from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_record import CheckRecord
from coordinator.rest.models import CheckRequest

log = logging.getLogger("txcoord.rest.checks")

#: Longest single consumer.poll: bounds how late a poll notices a shutdown.
_SLICE_SECONDS = 0.5

ConsumerFactory = Callable[[str], Any]


def consumer_group_of(producer_group: str) -> str:
    """Return the Kafka consumer group that serves check requests to `producer_group`."""
    return f"txcoord-rest-{producer_group}"


class _Slot:
    """One producer group's consumer, used by one poller at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.consumer: Any = None
        self.last_used = time.monotonic()


class CheckPoller:
    """Hand out check requests of one producer group per call; thread-safe."""

    def __init__(
        self,
        bootstrap_servers: str,
        layout: TopicLayout,
        idle_timeout: timedelta = timedelta(minutes=2),
        max_groups: int = 256,
        consumer_factory: ConsumerFactory | None = None,
        *,
        security: KafkaSecurity | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security or KafkaSecurity()
        #: A group's checks are on the shared check topic, or its own (coordinator/core/topics.py).
        self.layout = layout
        self.idle_timeout = idle_timeout
        self.max_groups = max_groups
        self._make_consumer = consumer_factory or self._kafka_consumer
        self._slots: dict[str, _Slot] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()

    def poll(
        self, producer_group: str, max_records: int, wait_seconds: float
    ) -> list[CheckRequest]:
        """Return up to `max_records` check requests of `producer_group`; [] if none came.

        Waits at most `wait_seconds` for the first one, then answers at once.
        """
        deadline = time.monotonic() + wait_seconds
        self._close_idle(keep=producer_group)
        with self._guard:
            slot = self._slots.setdefault(producer_group, _Slot())
        # Another poller of the group holds the consumer: wait for it within our own wait.
        if not slot.lock.acquire(timeout=max(wait_seconds, 0.001)):
            return []
        try:
            slot.last_used = time.monotonic()
            if slot.consumer is None:
                slot.consumer = self._make_consumer(producer_group)
            try:
                found = self._collect(slot.consumer, producer_group, max_records, deadline)
                if found:
                    slot.consumer.commit()
            except kafka_errors.CommitFailedError as exc:
                # A rebalance moved partitions: the records may be handed out again.
                log.warning("check requests of %s: commit failed: %s", producer_group, exc)
            except kafka_errors.KafkaError as exc:
                self._drop(slot)
                raise KafkaUnavailableError(f"reading check requests failed: {exc}") from exc
            slot.last_used = time.monotonic()
            return found
        finally:
            slot.lock.release()

    def close(self) -> None:
        """Stop every poll and close every consumer."""
        self._stop.set()
        with self._guard:
            slots, self._slots = list(self._slots.values()), {}
        for slot in slots:
            if slot.lock.acquire(timeout=2 * _SLICE_SECONDS + 1):
                try:
                    self._drop(slot)
                finally:
                    slot.lock.release()

    def _collect(
        self, consumer: Any, producer_group: str, max_records: int, deadline: float
    ) -> list[CheckRequest]:
        wanted = producer_group.encode()
        found: list[CheckRequest] = []
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            timeout_ms = int(max(0.0, min(remaining, _SLICE_SECONDS)) * 1000)
            batches = consumer.poll(timeout_ms=timeout_ms, max_records=max_records - len(found))
            for records in batches.values():
                for record in records:
                    if dict(record.headers or []).get(fmt.PRODUCER_GROUP) != wanted:
                        continue
                    try:
                        value = CheckRecord.decode(record.value).to_value()
                        found.append(CheckRequest.model_validate(value))
                    except (TypeError, ValueError):  # ValidationError is a ValueError
                        log.warning(
                            "skipping a malformed check record at %s-%d offset %d",
                            record.topic,
                            record.partition,
                            record.offset,
                        )
            # Long poll: answer as soon as something came, or when the wait is over.
            if found or remaining <= 0:
                break
        return found

    def _close_idle(self, keep: str) -> None:
        """Close the consumers of groups nobody polled lately (their partitions go to others).

        Beyond `max_groups` groups the least recently polled ones go too, so callers naming
        ever new groups cannot pile up consumers.
        """
        now = time.monotonic()
        limit = self.idle_timeout.total_seconds()
        with self._guard:
            others = sorted(
                (
                    (slot.last_used, group, slot)
                    for group, slot in self._slots.items()
                    if group != keep
                ),
                key=lambda item: item[0],
            )
            excess = len(others) + 1 - self.max_groups
            idle = [
                (group, slot) for i, (used, group, slot) in enumerate(others)
                if i < excess or now - used > limit
            ]  # fmt: skip
        for group, slot in idle:
            if slot.lock.acquire(blocking=False):
                try:
                    with self._guard:
                        if self._slots.get(group) is slot:
                            del self._slots[group]
                    self._drop(slot)
                finally:
                    slot.lock.release()

    @staticmethod
    def _drop(slot: _Slot) -> None:
        consumer, slot.consumer = slot.consumer, None
        if consumer is not None:
            try:
                consumer.close(autocommit=False)
            except Exception:  # closing a broken consumer is best effort
                log.debug("closing a check consumer", exc_info=True)

    def _kafka_consumer(self, producer_group: str) -> Any:
        try:
            return KafkaConsumer(
                self.layout.check_topic(producer_group),
                bootstrap_servers=self.bootstrap_servers,
                group_id=consumer_group_of(producer_group),
                client_id="txcoord-rest-checks",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                # A REST process killed -9 frees its partitions within this time.
                session_timeout_ms=10_000,
                heartbeat_interval_ms=3_000,
                bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                **kafka_python_options(self.security),
            )
        except kafka_errors.KafkaError as exc:
            raise KafkaUnavailableError(
                f"Kafka at {self.bootstrap_servers} cannot be reached: {exc}"
            ) from exc
