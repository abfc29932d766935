"""The simple consumer: receive committed messages by queue and offset, acknowledge each.

RocketMQ's SimpleConsumer contract with Pythonic names::

    consumer = SimpleConsumer("billing", {"OrderPaid": "TagA || TagB"},
                              bootstrap_servers="127.0.0.1:9092", warehouse="warehouse")
    consumer.start()
    for message in consumer.receive(max_messages=16, wait_seconds=5):
        handle(message)
        consumer.ack(message)
    consumer.close()

How it works (docs/consumers.md has the whole story):

- **Group.** The members of a group divide each subscribed topic's queues among themselves
  (coordinator/sdk/consumer/membership.py, allocation.py). When one joins or leaves, every
  member stores its committed offsets before the group's next generation starts, and each
  queue's new owner reads on from there. A member that dies without leaving is out after the
  session timeout (6 s), and what it had acknowledged since its last commit is delivered
  again: at least once.
- **Reading.** A queue's messages are read from the topic table by offset (delta-rs,
  coordinator/sdk/consumer/queue_reader.py). The engine's delivery notices say when a queue
  grew, within a batch of the commit; `system/queue_offsets` is looked at every
  `refresh_seconds` as well, in case a notice was lost.
- **Acknowledging.** A message handed out is invisible for `invisible_duration` seconds; not
  acknowledged by then, it is handed out again (`delivery_attempt` + 1). The group's offset of
  a queue is its first offset not yet acknowledged (coordinator/sdk/consumer/queue_progress.py),
  stored at most every `commit_interval` seconds while `receive` is called, on a rebalance
  and at `close`.
- **Bounds.** A receive hands out at most `max_messages`, and at most `max_bytes` if given
  (by `size_of`: the REST ingress measures each message's JSON); the first always comes.
  A consumer holds each message it handed out until it is acknowledged (for its
  redelivery): `max_unacked_messages` and `max_unacked_bytes` bound that, so a member that
  never acknowledges stops taking new messages (coordinator/sdk/consumer/hand_out_limits.py)
  instead of pulling its queues' backlog into memory.
- **Receipts.** A message's receipt names its delivery attempt: once the message is handed
  out again, an ack (or a change of invisible duration) with the earlier receipt does not
  count (RocketMQ makes a new receipt handle at every delivery).
- **Order.** With `orderly=True` a queue hands out its next message only once the previous
  one was acknowledged: per-queue order, at the price of one message in flight per queue.
- **Offsets of its own.** With `topics_per_group=True` (the `[kafka]` setting of a secured
  deployment) the group's offsets go to a topic of its own, `<offsets_topic>.<group>`, which
  a secured broker lets only the group's principal write (coordinator/core/topics.py
  `consumer_grants`); it is made beforehand (`txcoord provision --consumer-group`), and the
  group's name is then letters, digits, '_' and '-'. Otherwise every group shares
  `offsets_topic` (coordinator/sdk/consumer/offset_store.py).
- **Where a new group starts.** At a group's very first start (no offset stored for it),
  `start_from` says where: "last" (default, RocketMQ's CONSUME_FROM_LAST_OFFSET: only what
  is delivered from now on), "first", or a datetime (the first message delivered at or after
  it). A queue the group has no offset for later (one that appeared since, or a topic added to
  the subscription) is read from its first message, so nothing delivered after the group
  began is skipped.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

from kafka.consumer.subscription_state import ConsumerRebalanceListener

from coordinator.core.config import KafkaConfig
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import TopicLayout, consumer_group_topic_problem
from coordinator.protocol.names import topic_name_problem
from coordinator.sdk.consumer.allocation import allocate
from coordinator.sdk.consumer.hand_out_limits import AnswerBudget, HeldMessages, row_size
from coordinator.sdk.consumer.membership import GroupMembership
from coordinator.sdk.consumer.message_view import MessageView, Receipt
from coordinator.sdk.consumer.offset_store import OffsetStore
from coordinator.sdk.consumer.queue_progress import QueueProgress
from coordinator.sdk.consumer.queue_reader import QueueReader
from coordinator.sdk.consumer.tag_filter import TagFilter
from coordinator.sdk.errors import ProducerStateError

log = logging.getLogger(__name__)

__all__ = ["SimpleConsumer"]

_DEFAULTS = KafkaConfig()
Queue = tuple[str, int]
#: Rows read from a table per queue and call, at most.
READ_CHUNK = 256


class SimpleConsumer:
    """A member of consumer group `group` reading `subscriptions` (topic -> tag expression,
    or a list of topics for every tag); see the module docstring."""

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str] | Iterable[str],
        *,
        bootstrap_servers: str,
        warehouse: str,
        invisible_duration: float = 30.0,
        orderly: bool = False,
        start_from: str | datetime = "last",
        commit_interval: float = 1.0,
        refresh_seconds: float = 5.0,
        member: str | None = None,
        deliveries_topic: str = _DEFAULTS.deliveries_topic,
        offsets_topic: str = _DEFAULTS.consumer_offsets_topic,
        topics_per_group: bool = _DEFAULTS.topics_per_group,
        security: KafkaSecurity | None = None,
        storage_options: dict[str, str] | None = None,
        session_timeout_ms: int | None = None,
        max_unacked_messages: int | None = None,
        max_unacked_bytes: int | None = None,
    ) -> None:
        if not group or len(group) > 255:
            raise ValueError(f"consumer group must be 1-255 characters, not {group!r}")
        pairs = (
            subscriptions.items()
            if isinstance(subscriptions, Mapping)
            else ((topic, "*") for topic in subscriptions)
        )
        self.subscriptions = {topic: TagFilter.parse(expr) for topic, expr in pairs}
        if not self.subscriptions:
            raise ValueError("subscribe to at least one topic")
        for topic in self.subscriptions:
            if problem := topic_name_problem(topic):
                raise ValueError(problem)
        if not isinstance(start_from, datetime) and start_from not in ("first", "last"):
            raise ValueError(f"start_from must be 'first', 'last' or a datetime: {start_from!r}")
        if invisible_duration <= 0:
            raise ValueError("invisible_duration must be positive")
        layout = TopicLayout(offsets=offsets_topic, per_group=True)
        if topics_per_group and (problem := consumer_group_topic_problem(group, layout)):
            raise ValueError(problem)
        self.group = group
        self.member = member or f"{group}-{uuid.uuid4().hex[:12]}"
        self.invisible_duration = invisible_duration
        self.orderly = orderly
        self.start_from = start_from
        self.commit_interval = commit_interval
        self.refresh_seconds = refresh_seconds
        self._settings: dict[str, Any] = {
            "bootstrap_servers": bootstrap_servers,
            "deliveries_topic": deliveries_topic,
            "offsets_topic": offsets_topic,
            "topics_per_group": topics_per_group,
            "security": security,
            "session_timeout_ms": session_timeout_ms,
        }
        self.reader = QueueReader(warehouse, storage_options)
        self._membership: GroupMembership | None = None
        self._store: OffsetStore | None = None
        self._lock = threading.RLock()  # the queues' bookkeeping
        self._poll_lock = threading.Lock()  # one thread talks to Kafka at a time
        self._ends: dict[Queue, int] = {}
        self._owned: dict[Queue, QueueProgress] = {}
        self._leases: dict[Queue, int] = {}
        # The rows of the messages in flight, kept for their redelivery, within the bounds.
        self._held = HeldMessages(max_unacked_messages, max_unacked_bytes)
        self._lease_counter = itertools.count(1)
        # The group's joins counted when the queues were last divided (GroupMembership's
        # `assignments`), not its generation: a rejoin can end with the generation unchanged.
        self._assignment = -1
        # Between storing the offsets for a rebalance and the end of the join that follows:
        # hand nothing out, since a queue may move and its next owner reads on from the store.
        self._handing_over = False
        self._hand_over_at = 0  # the joins counted when the offsets were stored
        self._last_refresh = 0.0
        self._last_commit = 0.0
        self._turn = 0
        self._gaps: dict[Queue, int] = {}  # the offset each queue was last found missing at
        self._closed = False
        #: Messages handed out again after their invisible duration (for tests and metrics).
        self.redelivered = 0
        #: Called before this member stores its offsets for a rebalance (on kafka-python's
        #: network thread, so briefly): the push consumer lets the messages its listener is
        #: handling finish first, so that their acknowledgements are stored, not repeated.
        self.before_hand_over: Callable[[], None] | None = None

    # -- life ------------------------------------------------------------------------
    def start(self) -> SimpleConsumer:
        """Join the group; return self. Raises if Kafka or the topics are not there."""
        if self._membership is not None:
            raise ProducerStateError("this consumer was started already")
        s = self._settings
        self._store = OffsetStore(
            s["bootstrap_servers"],
            s["offsets_topic"],
            s["security"],
            per_group=s["topics_per_group"],
            group=self.group,
        )
        self._first_start()
        extra = (
            {}
            if s["session_timeout_ms"] is None
            else {"session_timeout_ms": s["session_timeout_ms"]}
        )
        self._membership = GroupMembership(
            s["bootstrap_servers"],
            self.group,
            self.member,
            deliveries_topic=s["deliveries_topic"],
            security=s["security"],
            listener=_HandOver(self),  # the hand-over on every rebalance
            **extra,
        )
        self._refresh(force=True)
        return self

    def close(self) -> None:
        """Store the committed offsets and leave the group (its queues go to the others)."""
        with self._poll_lock:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            # Without the lock: leaving the group runs the rebalance listener (which stores
            # the offsets once more, and takes the lock) on kafka-python's network thread.
            try:
                self._commit(force=True)
            except Exception as exc:
                log.warning("consumer %s: offsets not stored at close: %s", self.member, exc)
            if self._membership is not None:
                self._membership.close()
            if self._store is not None:
                self._store.close()

    def __enter__(self) -> SimpleConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the contract ----------------------------------------------------------------
    def receive(
        self,
        max_messages: int = 16,
        wait_seconds: float = 5.0,
        *,
        max_bytes: int | None = None,
        size_of: Callable[[MessageView], int] | None = None,
        queues: Collection[Queue] | None = None,
    ) -> list[MessageView]:
        """Return up to `max_messages` messages, waiting up to `wait_seconds` for the first.

        With `max_bytes`, the messages together measure at most that by `size_of` (default:
        body, keys, tags and properties), except a first message larger on its own. With
        `queues`, only messages of those of its queues (a RocketMQ push consumer reads
        queue by queue; an empty one takes part in the group and hands out nothing).
        """
        if not 1 <= max_messages <= 10_000:
            raise ValueError("max_messages must be 1..10000")
        if self._membership is None or self._closed:
            raise ProducerStateError("start() the consumer first (or it was closed)")
        deadline = time.monotonic() + max(0.0, wait_seconds)
        with self._poll_lock:
            while True:
                self._maintain(0.0)
                with self._lock:
                    taken = self._take(AnswerBudget(max_messages, max_bytes, size_of), queues)
                remaining = deadline - time.monotonic()
                if taken or remaining <= 0:
                    return taken
                self._maintain(min(remaining, 0.5))

    def ack(self, message: MessageView | Receipt) -> bool:
        """Acknowledge `message` (or its receipt); return False if the ack does not count (its
        queue moved to another member since, it was acknowledged already, it was handed out
        again since this delivery, or it was never handed out here): a message not
        acknowledged is delivered again."""
        receipt = message if isinstance(message, Receipt) else message.receipt
        queue = (receipt.topic, receipt.queue_id)
        with self._lock:
            if self._leases.get(queue) != receipt.lease:
                return False
            counted = self._owned[queue].ack(receipt.queue_offset, receipt.attempt)
            if counted:
                self._held.forget((*queue, receipt.queue_offset))
            return counted

    def change_invisible_duration(self, message: MessageView | Receipt, seconds: float) -> bool:
        """Hand `message` (or its receipt's) out again `seconds` from now unless acknowledged
        (0: at once); False if it is not in flight here as this delivery."""
        receipt = message if isinstance(message, Receipt) else message.receipt
        queue = (receipt.topic, receipt.queue_id)
        with self._lock:
            if self._leases.get(queue) != receipt.lease:
                return False
            return self._owned[queue].postpone(
                receipt.queue_offset, time.monotonic() + seconds, receipt.attempt
            )

    def attempt_in_flight(self, receipt: Receipt) -> int | None:
        """Return the delivery attempt `receipt`'s message is in flight as here (under the
        receipt's lease), or None: says why an ack with an older receipt did not count."""
        queue = (receipt.topic, receipt.queue_id)
        with self._lock:
            if self._leases.get(queue) != receipt.lease:
                return None
            return self._owned[queue].attempt_in_flight(receipt.queue_offset)

    def unacked(self) -> tuple[int, int]:
        """Return the messages handed out and not acknowledged yet, and their bytes."""
        with self._lock:
            return self._held.count, self._held.bytes

    def unacked_full(self) -> bool:
        """Return whether no new message fits under `max_unacked_messages` and
        `max_unacked_bytes` now (one did not at the last receive, or a bound is reached);
        messages due for redelivery are still handed out."""
        with self._lock:
            return self._held.full()

    def assigned(self) -> list[Queue]:
        """Return the queues this member reads now."""
        with self._lock:
            return sorted(self._owned)

    def lag(self) -> dict[Queue, int]:
        """Return, for each queue this member reads, the messages not yet acknowledged."""
        with self._lock:
            return {queue: p.lag() for queue, p in sorted(self._owned.items())}

    @property
    def members(self) -> tuple[str, ...]:
        """Return the group's members as of the current generation."""
        return () if self._membership is None else self._membership.members

    def describe(self) -> dict[str, Any]:
        """Return this member's view of its group and queues, for a report: why a member
        hands out nothing (not joined, a hand-over not ended, no queue known, none behind)."""
        membership = self._membership
        with self._lock:
            return {
                "member": self.member,
                "generation": -1 if membership is None else membership.generation,
                "joins": 0 if membership is None else membership.assignments,
                "divided_at_join": self._assignment,
                "members": list(self.members),
                "handing_over": self._handing_over,
                "hand_over_at_join": self._hand_over_at,
                "queues_known": len(self._ends),
                "queues": [
                    {
                        "topic": q[0],
                        "queue_id": q[1],
                        "committed": p.committed,
                        "fetched": p.fetched,
                        "end": p.end,
                    }
                    for q, p in sorted(self._owned.items())
                ],
                "unacked": self._held.count,
            }

    # -- inside ------------------------------------------------------------------------
    def _first_start(self) -> None:
        """At a group's very first start, store where it begins (`start_from`)."""
        assert self._store is not None
        if self._store.load(self.group):
            return
        ends = self.reader.ends(self.subscriptions)
        if self.start_from == "first" or not ends:
            return  # no offset: every queue is read from its first message
        if self.start_from == "last":
            start = ends
        else:
            assert isinstance(self.start_from, datetime)
            moment = self.start_from
            start = {}
            for (topic, queue), end in ends.items():
                first = self.reader.first_at_or_after(topic, queue, moment)
                start[topic, queue] = end if first is None else first
        self._store.commit(self.group, self.member, start)
        log.info("consumer group %s begins at %s", self.group, self.start_from)

    def _maintain(self, wait_seconds: float) -> None:
        """Take part in the group, learn of new rows, store offsets when due.

        A join runs on the Kafka client's own thread and is collected by the next poll, even
        one that comes after the join ended (coordinator/kafka_clients/join_group.py): a
        member polled in short slices, as a REST member is between its client's calls,
        joins as one polled without pause.
        """
        assert self._membership is not None
        notices = self._membership.poll(wait_seconds)
        with self._lock:
            grew = False
            for notice in notices:
                for end in notice.queues:
                    if end.topic in self.subscriptions:
                        grew |= self._learn((end.topic, end.queue_id), end.next_offset)
            if self._membership.assignments != self._assignment or grew:
                self._reallocate()
        self._refresh()
        self._commit()

    def _learn(self, queue: Queue, end: int) -> bool:
        """Record that `queue` ends at `end`; return True if the queue is new."""
        new = queue not in self._ends
        self._ends[queue] = max(end, self._ends.get(queue, 0))
        if queue in self._owned:
            progress = self._owned[queue]
            progress.end = max(progress.end, end)
        return new

    def _refresh(self, force: bool = False) -> None:
        """Look at `system/queue_offsets` every `refresh_seconds` (lost notices, new queues)."""
        now = time.monotonic()
        if not force and now - self._last_refresh < self.refresh_seconds:
            return
        self._last_refresh = now
        try:
            ends = self.reader.ends(self.subscriptions)
        except Exception as exc:  # the warehouse unreachable a moment: try again later
            log.warning("consumer %s: queue offsets not read: %s", self.member, exc)
            return
        with self._lock:
            grew = False
            for queue, end in ends.items():
                grew |= self._learn(queue, end)
            if grew or force:
                self._reallocate()

    def _reallocate(self) -> None:
        """Take the queues this member should read now, and give up the others (lock held)."""
        assert self._membership is not None and self._store is not None
        if self._handing_over and self._membership.assignments <= self._hand_over_at:
            # Offsets stored for a rebalance under way: the join that ends it divides the
            # queues, new ones too. Taking them now, by the old generation's members, would
            # hand out what the next owner reads again from the store (a queue that appeared
            # mid-rebalance was delivered by two members). The end is a completed join, not a
            # new generation: a follower's rejoin of a stable group keeps the generation, and
            # waiting for a new one left that member handing out nothing for ever
            # (tests/coordinator/sdk/consumer/test_simple_consumer.py, both cases).
            return
        members = self._membership.members
        self._assignment = self._membership.assignments
        self._handing_over = False
        mine = allocate(self._ends, members, self.member) if members else set()
        lost = set(self._owned) - mine
        gained = mine - set(self._owned)
        if lost:
            self._store.commit(self.group, self.member, {q: self._owned[q].committed for q in lost})
            for queue in lost:
                self._drop(queue)
        if gained:
            stored = self._store.load(self.group)
            for queue in gained:
                start = stored.get(queue, 0)
                self._owned[queue] = QueueProgress(committed=start, end=self._ends.get(queue, 0))
                self._leases[queue] = next(self._lease_counter)
        if lost or gained:
            log.info(
                "consumer %s (generation %d of %d member(s)) reads %d queue(s): +%s -%s",
                self.member,
                self._membership.generation,
                len(members),
                len(self._owned),
                sorted(gained),
                sorted(lost),
            )

    def hand_over(self) -> None:
        """Store every owned queue's offset (before a rebalance, so that the queues' next
        owners read on from there). The queues are kept until the next generation says which
        go: one that stays keeps its messages in flight. Until then nothing new is handed out:
        an ack of it could come after the next owner loaded the store, and the message would
        be delivered twice (seen under load in tests/coordinator/sdk/consumer/
        test_group_failover.py)."""
        with self._lock:
            if self._owned and self._store is not None:
                offsets = {q: p.committed for q, p in self._owned.items()}
                self._store.commit(self.group, self.member, offsets)
                for queue, offset in offsets.items():
                    self._owned[queue].stored = offset
            self._handing_over = True
            self._hand_over_at = 0 if self._membership is None else self._membership.assignments

    def give_up(self) -> None:
        """Give every queue up without storing (out of the group: a store would be refused
        as a stale member's, and the queues' next owners read on from the last stored)."""
        with self._lock:
            for queue in list(self._owned):
                self._drop(queue)
            self._assignment = -1

    def _drop(self, queue: Queue) -> None:
        progress = self._owned.pop(queue)
        self._leases.pop(queue, None)
        for offset in progress.in_flight:
            self._held.forget((*queue, offset))

    def _commit(self, force: bool = False) -> None:
        """Store the queues' committed offsets that moved (every `commit_interval`)."""
        now = time.monotonic()
        if self._store is None or (not force and now - self._last_commit < self.commit_interval):
            return
        self._last_commit = now
        with self._lock:
            moved = {q: p.committed for q, p in self._owned.items() if p.committed != p.stored}
        if not moved:
            return
        self._store.commit(self.group, self.member, moved)
        with self._lock:
            for queue, offset in moved.items():
                if queue in self._owned:
                    self._owned[queue].stored = offset

    def _take(
        self, answer: AnswerBudget, only: Collection[Queue] | None = None
    ) -> list[MessageView]:
        """Hand out what fits `answer` and the bounds on what is held: due redeliveries
        first, then new messages, of the queues of `only` if given (lock held)."""
        now = time.monotonic()
        visible_again = now + self.invisible_duration
        self._held.begin()
        queues = sorted(q for q in self._owned if only is None or q in only)
        if not queues or self._handing_over:
            return answer.messages
        self._turn = (self._turn + 1) % len(queues)
        queues = queues[self._turn :] + queues[: self._turn]  # no queue starves the others
        for queue in queues:
            progress = self._owned[queue]
            for offset in progress.due_again(now):
                row = self._held.row((*queue, offset))
                if row is None:  # not kept (cannot happen): read it again
                    rows = self.reader.read(queue[0], queue[1], offset, offset + 1)
                    if not rows:
                        continue
                    row = rows[0]
                    self._held.keep((*queue, offset), row)
                message = MessageView.of_row(
                    row, progress.next_attempt(offset), self._leases[queue]
                )
                if not answer.add(message):  # held already: no bound on what is held stops it
                    return answer.messages
                progress.taken(offset, visible_again)
                self.redelivered += 1
        for queue in queues:
            progress = self._owned[queue]
            tags = self.subscriptions[queue[0]]
            while (
                not answer.spent()
                and progress.behind()
                and not (self.orderly and progress.blocked())
            ):
                limit = 1 if self.orderly else min(READ_CHUNK, answer.room())
                rows = self.reader.read(
                    queue[0],
                    queue[1],
                    progress.fetched,
                    min(progress.end, progress.fetched + limit),
                )
                if not rows or int(rows[0]["queue_offset"]) != progress.fetched:
                    # Not readable here yet (a cached listing), or the next offset is missing
                    # from the table: read again at a later receive. Reading again now would
                    # find the same rows, and a missing row held this loop (and the lock) for
                    # good.
                    self._note_gap(queue, progress.fetched, rows)
                    break
                for row in rows:
                    offset = int(row["queue_offset"])
                    if offset != progress.fetched:
                        break  # a gap inside what was read: the next read begins at it
                    if not tags.matches(row["tags"]):
                        progress.skipped(offset)
                        continue
                    # Past the bound on what is held, or on this answer: left unread, and
                    # read again at a later receive.
                    if not self._held.has_room(row_size(row)):
                        return answer.messages
                    attempt = progress.next_attempt(offset)
                    if not answer.add(MessageView.of_row(row, attempt, self._leases[queue])):
                        return answer.messages
                    progress.taken(offset, visible_again)
                    self._held.keep((*queue, offset), row)
                    if answer.spent() or self.orderly:
                        break
        return answer.messages

    def _note_gap(self, queue: Queue, offset: int, rows: list[dict[str, Any]]) -> None:
        """Warn, once per queue and offset, of an offset the table skips (rows after it)."""
        if rows and self._gaps.get(queue) != offset:
            self._gaps[queue] = offset
            log.warning(
                "consumer %s: %s queue %d has no row at offset %d (next: %s); not handed out "
                "past it",
                self.member,
                queue[0],
                queue[1],
                offset,
                rows[0]["queue_offset"],
            )


class _HandOver(ConsumerRebalanceListener):  # type: ignore[misc]
    """Before the group's next generation: store the offsets, give the queues up."""

    def __init__(self, consumer: SimpleConsumer) -> None:
        self._consumer = consumer

    def on_partitions_revoked(self, revoked: Any) -> None:
        """Store every queue's offset: the next generation divides them anew."""
        try:
            if self._consumer.before_hand_over is not None:
                self._consumer.before_hand_over()
            self._consumer.hand_over()
        except Exception as exc:  # the next owner reads from the last stored offsets
            log.warning("consumer %s: hand-over failed: %s", self._consumer.member, exc)

    def on_partitions_assigned(self, assigned: Any) -> None:
        """Nothing here: the next poll's reallocation takes this member's share."""

    def on_partitions_lost(self, lost: Any) -> None:
        """Out of the group (session timeout): give every queue up, without storing."""
        self._consumer.give_up()
