"""Long polls on the check topic: one Kafka consumer per producer group, shared by its pollers.

The coordinator publishes each check request (RocketMQ's CHECK_TRANSACTION_STATE) on the
check topic with header `txcoord.producer_group` (streams/query/batch_writer.py). For a group
G the REST keeps one consumer in Kafka consumer group `txcoord-rest-G`, which reads the
whole topic (in the per-group layout G's own check topic, coordinator/core/topics.py) and hands out
only G's records. Pollers of G share that consumer one at a time, so each request reaches
one of them; several REST processes share the Kafka consumer group, so they split the
partitions. A new group starts at the earliest offset: a check request
published before the first poll is not missed.

Checks go first to the producer instance that sent the half (contract 5.3): a check
record naming an instance (header txcoord.producer_instance) waits in the group's mailbox
for `sender_first` for a poll that names that instance (`producer_instance`); after that,
or at once when it names none, any poller of the group gets it. The sender usually polls
all the time, so its checks reach it within one poll; a stopped sender's reach another
producer after the delay (RocketMQ's behaviour). Pollers of the group take turns on the
consumer in short slices, so one poll waiting for its own checks never blocks another.

A mailbox holds at most MAX_WAITING checks and `mailbox_bytes` of their JSON
(`rest.check_mailbox_size`): a check may carry a body of megabytes. Past either the group's
consumer reads nothing more, and a poll slice that meets a check that does not fit leaves it
in Kafka (its partition is sought back to it) for a later slice. A poll's answer holds at
most `max_bytes` of checks (`rest.max_answer_size`), the first however large.

Offsets are committed once the records are collected into the mailbox. A crash between the
commit and the answer loses those requests for this round only: the coordinator checks an
unresolved transaction again every transaction_check_interval (RocketMQ does the same).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kafka import KafkaConsumer
from kafka import errors as kafka_errors

from coordinator.core.errors import KafkaUnavailableError
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import TopicLayout
from coordinator.kafka_clients.options import COMMITTED_ONLY, kafka_python_options
from coordinator.kafka_clients.producer import BOOTSTRAP_TIMEOUT_MS
from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_record import CheckRecord
from coordinator.rest.models import CheckRequest

log = logging.getLogger("txcoord.rest.checks")

#: Longest single consumer.poll: bounds how late a poll notices a shutdown, a check that
#: came due, or a check another poller of the group collected for it.
_SLICE_SECONDS = 0.5
#: Checks of one group collected and not handed out yet, at most: past it the group's
#: consumer reads nothing more until pollers take some (they stay in Kafka meanwhile).
MAX_WAITING = 1000
#: Bytes of JSON of one group's collected checks, at most (rest.check_mailbox_size).
DEFAULT_MAILBOX_BYTES = 8 * 1024 * 1024

ConsumerFactory = Callable[[str], Any]


def consumer_group_of(producer_group: str) -> str:
    """Return the Kafka consumer group that serves check requests to `producer_group`."""
    return f"txcoord-rest-{producer_group}"


@dataclass
class _Waiting:
    """A collected check: from when anyone may have it, and the instance it is for first."""

    due: float
    addressee: str | None
    request: CheckRequest

    @property
    def size(self) -> int:
        """Return the bytes of the check's JSON (rendered once)."""
        return len(self.request.json_bytes())


class _Slot:
    """One producer group's consumer, used by one poller at a time, and its mailbox."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.consumer: Any = None
        self.last_used = time.monotonic()
        self.mail_lock = threading.Lock()
        self.waiting: list[_Waiting] = []
        self.waiting_bytes = 0  # of `waiting`'s JSON
        #: A check did not fit at the last read: read no more until one is handed out
        #: (reading it again each slice would fetch the same megabytes for nothing).
        self.stalled = False

    def hand_out(
        self, instance: str | None, max_records: int, max_bytes: int | None = None
    ) -> list[CheckRequest]:
        """Take up to `max_records` checks for `instance` (or for anyone by now), in order,
        of at most `max_bytes` of JSON together (None: any) but for a first one larger."""
        now = time.monotonic()
        taken: list[CheckRequest] = []
        spent = 0
        with self.mail_lock:
            kept: list[_Waiting] = []
            for item in self.waiting:
                mine = item.addressee is None or item.addressee == instance or item.due <= now
                fits = len(taken) < max_records and (
                    not taken or max_bytes is None or spent + item.size <= max_bytes
                )
                if mine and fits:
                    taken.append(item.request)
                    spent += item.size
                else:
                    kept.append(item)
            self.waiting = kept
            self.waiting_bytes -= spent
            self.stalled = self.stalled and not taken
        return taken

    def room(self, max_bytes: int) -> tuple[int, int]:
        """Return how many more checks, and bytes of them, the mailbox takes."""
        with self.mail_lock:
            return MAX_WAITING - len(self.waiting), max_bytes - self.waiting_bytes


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
        sender_first: timedelta = timedelta(seconds=2),
        mailbox_bytes: int = DEFAULT_MAILBOX_BYTES,
        consumer_group: Callable[[str], str] = consumer_group_of,
    ) -> None:
        #: The Kafka consumer group that reads a producer group's checks: each endpoint (REST,
        #: the RocketMQ gRPC endpoint) has its own, so each of them sees every check.
        self.consumer_group = consumer_group
        #: How long a check waits for a poll of the instance that sent its half.
        self.sender_first = sender_first.total_seconds()
        self.bootstrap_servers = bootstrap_servers
        self.security = security or KafkaSecurity()
        #: A group's checks are on the shared check topic, or its own (coordinator/core/topics.py).
        self.layout = layout
        self.idle_timeout = idle_timeout
        self.max_groups = max_groups
        self.mailbox_bytes = mailbox_bytes
        self._make_consumer = consumer_factory or self._kafka_consumer
        self._slots: dict[str, _Slot] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()

    def poll(
        self,
        producer_group: str,
        max_records: int,
        wait_seconds: float,
        producer_instance: str | None = None,
        max_bytes: int | None = None,
    ) -> list[CheckRequest]:
        """Return up to `max_records` check requests of `producer_group`; [] if none came.

        Waits at most `wait_seconds` for the first one, then answers at once. A poll naming
        `producer_instance` gets the checks addressed to that instance at once; others get
        them after `sender_first`. With `max_bytes`, the checks' JSON takes at most that
        (a first check larger alone comes on its own).
        """
        deadline = time.monotonic() + wait_seconds
        self._close_idle(keep=producer_group)
        with self._guard:
            slot = self._slots.setdefault(producer_group, _Slot())
        looked = False  # a poll without a wait still reads once
        while True:
            found = slot.hand_out(producer_instance, max_records, max_bytes)
            remaining = max(0.0, deadline - time.monotonic())
            if found or (looked and remaining <= 0) or self._stop.is_set():
                return found
            # Another poller of the group holds the consumer: take turns, slice by slice.
            if not slot.lock.acquire(timeout=max(0.001, min(remaining, _SLICE_SECONDS))):
                looked = True
                continue
            try:
                self._fill(slot, producer_group, max_records, min(remaining, _SLICE_SECONDS))
            finally:
                slot.lock.release()
            looked = True

    def _fill(self, slot: _Slot, producer_group: str, max_records: int, wait: float) -> None:
        """Collect the group's checks of one poll slice into its mailbox (slot lock held)."""
        slot.last_used = time.monotonic()
        room, room_bytes = slot.room(self.mailbox_bytes)
        if room <= 0 or room_bytes <= 0 or slot.stalled:
            self._stop.wait(wait)  # the pollers take what waits first
            return
        if slot.consumer is None:
            slot.consumer = self._make_consumer(producer_group)
        try:
            found, slot.stalled = self._collect(
                slot.consumer,
                producer_group,
                min(max_records, room),
                wait,
                room_bytes,
                empty=room == MAX_WAITING,
            )
            if found:
                slot.consumer.commit()
        except kafka_errors.CommitFailedError as exc:
            # A rebalance moved partitions: the records may be handed out again.
            log.warning("check requests of %s: commit failed: %s", producer_group, exc)
        except kafka_errors.KafkaError as exc:
            self._drop(slot)
            raise KafkaUnavailableError(f"reading check requests failed: {exc}") from exc
        now = time.monotonic()
        slot.last_used = now
        with slot.mail_lock:
            arrived = [
                _Waiting(now + self.sender_first if addressee else now, addressee, request)
                for addressee, request in found
            ]
            slot.waiting += arrived
            slot.waiting_bytes += sum(item.size for item in arrived)

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
        self,
        consumer: Any,
        producer_group: str,
        max_records: int,
        wait: float,
        max_bytes: int,
        *,
        empty: bool,
    ) -> tuple[list[tuple[str | None, CheckRequest]], bool]:
        """Return the group's checks of one poll, each with the instance it is for first,
        and whether one did not fit: at most `max_bytes` of JSON, but for one check larger
        alone into an `empty` mailbox. A partition whose next check does not fit is sought
        back to it, to be read again."""
        wanted = producer_group.encode()
        found: list[tuple[str | None, CheckRequest]] = []
        spent = 0
        full = False
        batches = consumer.poll(timeout_ms=int(max(0.0, wait) * 1000), max_records=max_records)
        for partition, records in batches.items():
            for record in records:
                if full:
                    consumer.seek(partition, record.offset)  # left in Kafka for later
                    break
                headers = dict(record.headers or [])
                if headers.get(fmt.PRODUCER_GROUP) != wanted:
                    continue  # another group's check, or a claim (coordinator/sdk/check_routing.py)
                try:
                    check = CheckRecord.decode(record.value)
                    request = CheckRequest.model_validate(check.to_value())
                except (TypeError, ValueError):  # ValidationError is a ValueError
                    log.warning(
                        "skipping a malformed check record at %s-%d offset %d",
                        record.topic,
                        record.partition,
                        record.offset,
                    )
                    continue
                size = len(request.json_bytes())
                if spent + size > max_bytes and (found or not empty):
                    full = True
                    consumer.seek(partition, record.offset)
                    break
                addressee = check.producer_instance if self.sender_first > 0 else None
                found.append((addressee, request))
                spent += size
        return found, full

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
                (group, slot)
                for i, (used, group, slot) in enumerate(others)
                if i < excess or now - used > limit
            ]
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
                group_id=self.consumer_group(producer_group),
                client_id="txcoord-rest-checks",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                # A REST process killed -9 frees its partitions within this time.
                session_timeout_ms=10_000,
                heartbeat_interval_ms=3_000,
                bootstrap_timeout_ms=BOOTSTRAP_TIMEOUT_MS,
                **COMMITTED_ONLY,  # a fenced coordinator's checks are aborted
                **kafka_python_options(self.security),
            )
        except kafka_errors.KafkaError as exc:
            raise KafkaUnavailableError(
                f"Kafka at {self.bootstrap_servers} cannot be reached: {exc}"
            ) from exc
