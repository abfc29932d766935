"""What an operator asks of consumer groups: who is in each, which queue each reads, the lag.

Three sources, read-only: the groups' committed offsets (the offsets topic, or in the
per-group layout each consumer group's own that this principal may read, found by their
prefix: coordinator/sdk/consumer/offset_store.py), their live members (Kafka's group
coordinator, group `txcoord-consumer-<group>`), and every queue's end (`system/queue_offsets`). A
queue's lag is its end minus the group's committed offset: messages delivered and not yet
acknowledged by the group. Its reader is computed as every member computes it
(coordinator/sdk/consumer/allocation.py).

`reset` moves a group's offsets (to the first or next message, or the first delivered at a
time), only while it has no live member: a running member would overwrite them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from coordinator.core.config import Config
from coordinator.core.errors import KafkaUnavailableError
from coordinator.core.kafka_security import reachable
from coordinator.kafka_clients.admin import admin_client
from coordinator.sdk.consumer.allocation import owner
from coordinator.sdk.consumer.membership import kafka_group_id
from coordinator.sdk.consumer.offset_store import OffsetStore
from coordinator.sdk.consumer.queue_reader import QueueReader

__all__ = ["GroupLag", "QueueLag", "describe", "live_members", "reset"]

log = logging.getLogger(__name__)

#: Who a reset's offsets are stored as.
RESET_MEMBER = "txcoord-consumers-reset"


@dataclass(frozen=True)
class QueueLag:
    """One queue of one group: where the group is, where the queue ends, who reads it."""

    group: str
    topic: str
    queue_id: int
    committed: int
    end: int
    lag: int
    reader: str | None
    committed_by: str
    committed_at_ms: int

    def as_json(self) -> dict[str, Any]:
        """Return this row as JSON-ready values."""
        return asdict(self)


def live_members(config: Config, groups: list[str]) -> dict[str, list[str]]:
    """Return the live members' names of each of `groups` (empty list: none)."""
    if not groups:
        return {}
    kafka = config.kafka
    with admin_client(kafka.bootstrap_servers, security=kafka.security) as admin:
        described = admin.describe_groups([kafka_group_id(g) for g in groups])
    found: dict[str, list[str]] = {}
    for group in groups:
        info = described.get(kafka_group_id(group)) or {}
        found[group] = sorted(str(m.get("client_id", "")) for m in info.get("members") or [])
    return found


def describe(config: Config, group: str | None = None) -> list[QueueLag]:
    """Return every queue of every group (or of `group`) that committed offsets."""
    store = _store(config)
    try:
        stored = store.every_group()
    finally:
        store.close()
    if group is not None:
        stored = {group: stored.get(group, {})}
    members = live_members(config, sorted(stored))
    reader = QueueReader(config.warehouse)
    topics = sorted({topic for queues in stored.values() for topic, _ in queues})
    ends = reader.ends(topics)
    rows = []
    for name, queues in sorted(stored.items()):
        # Queues the group reads and never committed count too: from their first message.
        known = {**{q: None for q in ends if q[0] in {t for t, _ in queues}}, **queues}
        for (topic, queue_id), entry in sorted(known.items()):
            committed = 0 if entry is None else entry.offset
            end = ends.get((topic, queue_id), 0)
            rows.append(
                QueueLag(
                    group=name,
                    topic=topic,
                    queue_id=queue_id,
                    committed=committed,
                    end=end,
                    lag=max(0, end - committed),
                    reader=owner(topic, queue_id, members.get(name, [])),
                    committed_by="" if entry is None else entry.member,
                    committed_at_ms=0 if entry is None else entry.at_ms,
                )
            )
    return rows


class GroupLag:
    """Every group's lag per topic, kept fresh by a thread of its own (for /metrics).

    Reading it takes the offsets topic, the groups and the queue ends: up to Kafka's request
    timeout while Kafka is away. A scrape must answer at once whatever Kafka does, so it
    gets the last figures read. The thread runs while scrapes come: it starts at a scrape,
    reads every `every` seconds, and ends once no scrape came for IDLE_READS reads (an
    ingress nobody scrapes reads nothing). A failing read is logged once, not every time.
    """

    #: Reads without a scrape after which the thread ends (the next scrape starts it again).
    IDLE_READS = 4

    def __init__(self, config: Config, every: float = 15.0) -> None:
        self.config = config
        self.every = every
        self._lag: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._asked = 0.0
        self._failing: str | None = None

    def __call__(self) -> dict[tuple[str, str], int]:
        """Return (group, topic) -> messages delivered and not acknowledged by the group, as
        last read (empty before the first read ends)."""
        with self._lock:
            self._asked = time.monotonic()
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="txcoord-group-lag", daemon=True
                )
                self._thread.start()
            return dict(self._lag)

    def close(self) -> None:
        """Stop reading (the thread ends after the read in progress, if any)."""
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._read()
            self._stop.wait(self.every)
            with self._lock:
                if time.monotonic() - self._asked > self.IDLE_READS * self.every:
                    self._thread = None
                    return

    def _read(self) -> None:
        try:
            servers = self.config.kafka.bootstrap_servers
            if not reachable(servers, timeout=0.5):  # before any client: no retry storm logged
                raise KafkaUnavailableError(f"Kafka at {servers} cannot be reached")
            lag: dict[tuple[str, str], int] = {}
            for row in describe(self.config):
                lag[row.group, row.topic] = lag.get((row.group, row.topic), 0) + row.lag
        except Exception as exc:  # Kafka or the warehouse away: the last figures stay
            reason = f"{type(exc).__name__}: {exc}"
            if reason != self._failing:
                log.warning("consumer group lag not read (until it is again): %s", reason)
            self._failing = reason
            return
        if self._failing is not None:
            log.info("consumer group lag read again")
        self._failing = None
        with self._lock:
            self._lag = lag


def reset(config: Config, group: str, topic: str, to: str | datetime) -> dict[int, int]:
    """Move `group`'s offsets of `topic`'s queues to "earliest", "latest", a time, or
    "shared" (what the group committed in the shared offsets topic: the one-time step of an
    upgrade to the per-group layout's offsets topics); return the new offsets. Refused
    (ValueError) while the group has live members."""
    if live := live_members(config, [group]).get(group):
        raise ValueError(
            f"consumer group {group!r} has {len(live)} live member(s) ({', '.join(live)}): "
            "stop them first, or they would overwrite the reset"
        )
    reader = QueueReader(config.warehouse)
    ends = {q: end for (t, q), end in reader.ends([topic]).items() if t == topic}
    if not ends:
        raise ValueError(f"topic {topic!r} has no delivered message yet: nothing to reset")
    if to == "shared":
        offsets = _shared_offsets(config, group, topic, ends)
    else:
        offsets = {q: _offset_at(reader, topic, q, end, to) for q, end in sorted(ends.items())}
    store = _store(config)
    try:
        store.commit(group, RESET_MEMBER, {(topic, q): o for q, o in offsets.items()})
    finally:
        store.close()
    return offsets


def _offset_at(reader: QueueReader, topic: str, queue_id: int, end: int, to: str | datetime) -> int:
    """Return the offset of `topic`'s queue `queue_id` (its end `end`) that `to` names."""
    if to == "earliest":
        return 0
    if to == "latest":
        return end
    assert isinstance(to, datetime)
    first = reader.first_at_or_after(topic, queue_id, to)
    return end if first is None else first


def _shared_offsets(config: Config, group: str, topic: str, ends: dict[int, int]) -> dict[int, int]:
    """Return `group`'s offsets of `topic` in the shared offsets topic, each at most its
    queue's end (ValueError: not the per-group layout, or none stored there)."""
    kafka = config.kafka
    if not kafka.topics_per_group:
        raise ValueError(
            "--to shared copies a group's offsets from the shared offsets topic into its own: "
            "that is the per-group layout's ([kafka] topics_per_group = true)"
        )
    try:
        shared = OffsetStore(kafka.bootstrap_servers, kafka.consumer_offsets_topic, kafka.security)
    except ValueError as exc:  # no shared offsets topic (a deployment that never had one)
        raise ValueError(f"no shared offsets to copy: {exc}") from exc
    try:
        stored = shared.every_group().get(group, {})
    finally:
        shared.close()
    offsets = {
        queue_id: min(entry.offset, ends.get(queue_id, entry.offset))
        for (name, queue_id), entry in stored.items()
        if name == topic
    }
    if not offsets:
        raise ValueError(
            f"the shared offsets topic {kafka.consumer_offsets_topic!r} holds no offset of "
            f"consumer group {group!r} for topic {topic!r}"
        )
    return dict(sorted(offsets.items()))


def _store(config: Config) -> OffsetStore:
    kafka = config.kafka
    return OffsetStore(
        kafka.bootstrap_servers,
        kafka.consumer_offsets_topic,
        kafka.security,
        per_group=kafka.topics_per_group,
    )
