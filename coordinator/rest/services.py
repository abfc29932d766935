"""What the routes need, as one object an app is built with (tests pass their own parts)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import anyio

from coordinator.core.config import Config
from coordinator.rest.auth import Authenticator
from coordinator.rest.consumers import ConsumerMembers
from coordinator.rest.in_flight import InFlight
from coordinator.rest.kafka_writer import Stored, WriteFailure
from coordinator.rest.metrics import Metrics
from coordinator.rest.models import CheckRequest
from coordinator.rest.poll_slots import PollSlots
from coordinator.rest.pools import READ_THREADS, WRITE_THREADS
from coordinator.rest.records import Record
from coordinator.rest.topic_limits import TopicLimits
from delta_tables.lookup import TransactionState


class Writer(Protocol):
    """Makes half and op records durable (kafka_writer.KafkaWriter)."""

    def send_half(self, record: Record) -> Stored: ...
    def send_op(self, record: Record) -> Stored: ...
    def send_halves(self, records: Sequence[Record]) -> list[Stored | WriteFailure]: ...
    def send_ops(self, records: Sequence[Record]) -> list[Stored | WriteFailure]: ...
    def close(self) -> None: ...


class Lookup(Protocol):
    """Finds a transaction's state (delta_tables/lookup.py TransactionLookup)."""

    def state(
        self, transaction_id: str, producer_group: str | None = None
    ) -> TransactionState | None: ...
    def producer_groups(self, transaction_id: str) -> set[str]: ...


class Poller(Protocol):
    """Hands out check requests (check_poll.CheckPoller)."""

    def poll(
        self,
        producer_group: str,
        max_records: int,
        wait_seconds: float,
        producer_instance: str | None = None,
        max_bytes: int | None = None,
    ) -> list[CheckRequest]: ...
    def close(self) -> None: ...


def epoch_ms() -> int:
    """Return the wall clock in epoch milliseconds."""
    return time.time_ns() // 1_000_000


@dataclass
class Services:
    """The parts of one REST app."""

    config: Config
    auth: Authenticator
    writer: Writer
    lookup: Lookup
    poller: Poller
    #: The REST consumers' members (consumers.py).
    consumers: ConsumerMembers
    metrics: Metrics = field(default_factory=Metrics)
    #: The REST's clock, recorded as txcoord.born_at (never used as event time).
    clock: Callable[[], int] = epoch_ms
    #: Long polls (check polls, and receives of consumer groups) per group and in all
    #: (contract 5.1: shared fairly between groups).
    poll_slots: PollSlots = field(default_factory=PollSlots)
    #: The threads waiting polls run on: one per slot, so a sent poll never waits for one.
    poll_limiter: anyio.CapacityLimiter = field(init=False)
    #: The threads of the sends, and of the reads: a send never waits behind a read (pools.py).
    write_limiter: anyio.CapacityLimiter = field(init=False)
    read_limiter: anyio.CapacityLimiter = field(init=False)
    #: The reads each token has in flight, at most rest.max_reads_per_token (in_flight.py).
    reads_in_flight: InFlight = field(init=False)
    #: The sends each token has in flight, at most rest.max_sends_per_token (in_flight.py).
    sends_in_flight: InFlight = field(init=False)
    #: New topics past max_topics (or per group) refused before Kafka (topic_limits.py).
    topic_limits: TopicLimits = field(init=False)

    def __post_init__(self) -> None:
        self.poll_limiter = anyio.CapacityLimiter(self.poll_slots.total)
        self.write_limiter = anyio.CapacityLimiter(WRITE_THREADS)
        self.read_limiter = anyio.CapacityLimiter(READ_THREADS)
        self.reads_in_flight = InFlight(self.config.rest.max_reads_per_token, "reads")
        self.sends_in_flight = InFlight(self.config.rest.max_sends_per_token, "sends")
        self.topic_limits = TopicLimits(self.config)
