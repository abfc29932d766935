"""REST consumer members: one SimpleConsumer per (group, member), kept alive between calls.

A client that is not Python consumes over HTTP (contract 5.5, "the REST ingress offers the
same receive/ack"): each receive names its consumer group, its member id (chosen by the
client, or made up by the first answer and sent back by the client from then on) and its
subscription. This process keeps that member's SimpleConsumer (coordinator/sdk/consumer/)
between calls, so the member stays in its group, owns its share of the queues, and
remembers what it handed out until it is acknowledged.

    identity     (group, member). A member's subscription (topic, tag expression, orderly)
                 is fixed by its first receive: another one under the same name is refused
                 (SubscriptionConflictError, 409), since two consumers of one name in one
                 group would both take that name's share of the queues.
    idle         a member nobody called (receive, ack, change of invisible duration) for
                 `idle_timeout` seconds is closed by a reaper thread: its offsets are stored
                 and it leaves the group, so its queues go to the group's other members.
    limits       at most `max_members` members in this process, `per_group` per group and
                 as many per token (in_flight.holder_of; its members of every consumer
                 group together): each is three Kafka clients and a warehouse reader. One
                 more is refused at once (ConsumersFullError, 429), never queued. The share
                 lets at least GROUPS_AT_FULL_SHARE groups or tokens hold theirs at once, as
                 for long polls (before, 4 groups held all 64 members, and one token granted
                 4 groups did too; issue 61, finding 8). A member holds at most
                 `rest.max_unacked_messages` messages and `rest.max_unacked_size` bytes
                 handed out and not acknowledged (each is kept for its redelivery): a
                 receive that can hand out nothing for that is refused at once
                 (UnackedLimitError, 429) until acknowledgements free room.
    failures     a member whose start or receive failed (Kafka, the warehouse) is closed in
                 the background and made anew by the next call
                 (ConsumerUnavailableError, 503).
    receipts     signed strings bound to the member's incarnation and to the delivery
                 attempt (receipts.py): a client cannot ack another member's messages, an
                 offset never handed out, nor a later delivery with an earlier receipt.
    offsets      in the per-group layout a consumer group's offsets go to a topic of its
                 own, which this ingress makes before the group's first member here starts
                 (coordinator/kafka_clients/offsets_topic.py).
    lag          the metric reads each member's lag as of its last call (taken on that
                 call's thread): never the member's own lock, which a receive holds while
                 it reads the warehouse and Kafka, so a scrape never waits for a member.

Members live in this process: behind a load balancer a client's calls must reach the same
process (a receipt another process issued answers `invalid_receipt`, and the message is
delivered again after its invisible duration). Thread-safe; blocking calls (start, receive)
run on the REST's long-poll pool (consumer_routes.py).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from deltalake.exceptions import DeltaError
from kafka import errors as kafka_errors

from coordinator.core.config import Config
from coordinator.kafka_clients.offsets_topic import ensure_offsets_topic
from coordinator.rest.auth import Principal
from coordinator.rest.models import ReceiptReason
from coordinator.rest.receipts import ReceiptCodec
from coordinator.sdk import SdkError
from coordinator.sdk.consumer import MessageView, Receipt, SimpleConsumer

log = logging.getLogger("txcoord.rest.consumers")

__all__ = [
    "DEFAULT_MAX_MEMBERS",
    "MIN_IDLE_SECONDS",
    "ConsumerMembers",
    "ConsumerUnavailableError",
    "ConsumersFullError",
    "Delivery",
    "Outcome",
    "Received",
    "Subscription",
    "SubscriptionConflictError",
    "UnackedLimitError",
]

#: The Kafka session of a REST member (the SDK's default is 6 s).
REST_SESSION_TIMEOUT_MS = 20_000
#: Members of one REST process (each holds three Kafka clients and their threads).
DEFAULT_MAX_MEMBERS = 64
#: The share is sized so that at least this many groups (or tokens) can each have a full
#: share: as many as for long polls (poll_slots.py), so 8 members each at the defaults.
GROUPS_AT_FULL_SHARE = 8
#: A member is closed after at least this long without a call (and 2 x the longest wait).
MIN_IDLE_SECONDS = 60.0
#: Errors of Kafka and of the warehouse that make a member unusable: answered 503.
_UNAVAILABLE = (kafka_errors.KafkaError, OSError, DeltaError, TimeoutError, SdkError)


class ConsumersFullError(Exception):
    """No room for one more member: its group holds its share, or every place is taken."""


class SubscriptionConflictError(Exception):
    """The member exists with another subscription."""


class ConsumerUnavailableError(Exception):
    """The member cannot serve now (Kafka or the warehouse failed, or it is closing)."""


class UnackedLimitError(Exception):
    """The member holds as many unacknowledged messages (or bytes) as it may, and nothing is
    due for redelivery."""


@dataclass(frozen=True)
class Subscription:
    """What one member reads: one topic, a tag expression (normalised), in order or not."""

    topic: str
    tags: str
    orderly: bool = False

    def describe(self) -> str:
        """Return the subscription in words, for error messages."""
        order = ", orderly" if self.orderly else ""
        return f"topic {self.topic!r} with tags {self.tags!r}{order}"


@dataclass(frozen=True)
class Delivery:
    """One message handed out: its receipt string, and its JSON as the caller rendered it
    (None without a renderer)."""

    message: MessageView
    receipt: str
    rendered: bytes | None = None


@dataclass(frozen=True)
class Received:
    """What one receive handed out."""

    member: str
    messages: list[Delivery]


#: Renders one message with its receipt string (the REST's JSON): measured for the budget.
Renderer = Callable[[MessageView, str], bytes]


@dataclass(frozen=True)
class Outcome:
    """The fate of one receipt of an ack or a change of invisible duration."""

    done: bool
    reason: ReceiptReason | None = None


#: Builds a member's consumer: (group, member, subscription, invisible seconds, start_from).
ConsumerFactory = Callable[[str, str, Subscription, float, str], SimpleConsumer]


class _Member:
    """One member's consumer and bookkeeping (fields guarded by ConsumerMembers._lock)."""

    def __init__(
        self,
        group: str,
        name: str,
        subscription: Subscription,
        consumer: SimpleConsumer,
        holder: Principal | None,
    ) -> None:
        self.group = group
        self.name = name
        self.subscription = subscription
        self.consumer = consumer
        #: The token whose share it counts against (None: an admin's, open mode's).
        self.holder = holder
        #: Messages not yet acknowledged, per queue, as of its last call (what metrics read).
        self.lag: dict[tuple[str, int], int] = {}
        #: Receipts of an earlier member of the same name do not count here.
        self.incarnation = uuid.uuid4().hex[:12]
        self.users = 0  # calls using it now: never closed under them
        self.last_used = time.monotonic()
        self.started = False
        self.failed = False  # closed at the reaper's next round
        self.closing = False
        self.start_lock = threading.Lock()


class ConsumerMembers:
    """The REST's consumer members; see the module docstring."""

    def __init__(
        self,
        config: Config,
        *,
        max_members: int = DEFAULT_MAX_MEMBERS,
        per_group: int | None = None,
        idle_timeout: float | None = None,
        consumer_factory: ConsumerFactory | None = None,
        codec: ReceiptCodec | None = None,
        offsets_topic_maker: Callable[[str], object] | None = None,
    ) -> None:
        """`offsets_topic_maker` makes a consumer group's offsets topic before its first
        member here starts (default: in the per-group layout, `ensure_offsets_topic`)."""
        share = per_group if per_group is not None else max(1, max_members // GROUPS_AT_FULL_SHARE)
        if max_members < 1 or not 1 <= share <= max_members:
            raise ValueError(f"need max_members >= 1 and 1 <= per_group <= max_members: {share}")
        longest_wait = config.rest.check_poll_max_wait.total_seconds()
        self.config = config
        self.max_members = max_members
        self.per_group = share
        self.idle_timeout = (
            idle_timeout if idle_timeout is not None else max(MIN_IDLE_SECONDS, 2 * longest_wait)
        )
        self._make = consumer_factory or self._simple_consumer
        if offsets_topic_maker is None and config.kafka.topics_per_group:
            offsets_topic_maker = partial(ensure_offsets_topic, config.kafka)
        self._make_offsets_topic = offsets_topic_maker
        self._offsets_topics: set[str] = set()  # the groups whose offsets topic was made
        self._codec = codec or ReceiptCodec()
        self._members: dict[tuple[str, str], _Member] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    # -- the calls -----------------------------------------------------------------------
    def receive(
        self,
        group: str,
        member: str | None,
        subscription: Subscription,
        *,
        max_messages: int,
        wait_seconds: float,
        invisible_seconds: float,
        start_from: str = "last",
        max_bytes: int | None = None,
        render: Renderer | None = None,
        holder: Principal | None = None,
        queues: Collection[tuple[str, int]] | None = None,
    ) -> Received:
        """Hand out up to `max_messages` messages to `member` of `group` (made and started if
        new), waiting up to `wait_seconds` for the first; each invisible `invisible_seconds`.

        With `render`, each message is rendered as it is taken (Delivery.rendered), and
        the rendered messages take at most `max_bytes` in all (None: any), but for a first
        one larger alone. Raises UnackedLimitError if the member may take no new message
        (rest.max_unacked_messages, rest.max_unacked_size) and none is due again. A new
        member counts against `holder`'s share (None: its group's only). With `queues`, only
        messages of those of the member's queues (SimpleConsumer.receive).
        """
        name = member or f"rest-{uuid.uuid4().hex[:16]}"
        with self._using_new(
            group, name, subscription, invisible_seconds, start_from, holder=holder
        ) as entry:
            consumer = entry.consumer
            rendered: dict[Receipt, tuple[str, bytes]] = {}

            def size_of(message: MessageView) -> int:
                # Rendered as it is taken, once: the budget measures the bytes that are sent.
                receipt = self._codec.encode(group, name, entry.incarnation, message.receipt)
                data = render(message, receipt) if render is not None else b""
                rendered[message.receipt] = (receipt, data)
                return len(data)

            try:
                # Full: only redeliveries may come, and only those due now (no waiting).
                wait = 0.0 if consumer.unacked_full() else wait_seconds
                if render is None:
                    messages = consumer.receive(max_messages, wait, queues=queues)
                else:
                    messages = consumer.receive(
                        max_messages, wait, max_bytes=max_bytes, size_of=size_of, queues=queues
                    )
                if invisible_seconds != consumer.invisible_duration:  # set at the first call
                    for message in messages:
                        consumer.change_invisible_duration(message, invisible_seconds)
            except _UNAVAILABLE as exc:
                self._fail(entry)
                raise ConsumerUnavailableError(
                    f"member {name!r} of consumer group {group!r} failed to receive and "
                    f"is being closed (what it held is delivered again): {exc}"
                ) from exc
            except BaseException:
                self._fail(entry)  # a bug: do not keep a member in an unknown state
                raise
            if not messages and consumer.unacked_full():
                count, size = consumer.unacked()
                raise UnackedLimitError(
                    f"member {name!r} of consumer group {group!r} holds {count} messages "
                    f"({size} bytes) handed out and not acknowledged: at most "
                    f"rest.max_unacked_messages ({self.config.rest.max_unacked_messages}) and "
                    f"rest.max_unacked_size ({self.config.rest.max_unacked_size} bytes) per "
                    "member; ack what it received (what is not acknowledged is handed out "
                    "again after its invisible duration), then receive again"
                )
            issued = []
            for m in messages:
                receipt, data = rendered.get(m.receipt) or (
                    self._codec.encode(group, name, entry.incarnation, m.receipt),
                    None,
                )
                issued.append(Delivery(m, receipt, data))
        return Received(name, issued)

    def ack(self, group: str, member: str, receipts: Sequence[str]) -> list[Outcome]:
        """Acknowledge each receipt of `member` of `group`; one Outcome per receipt."""
        return self._settle(group, member, receipts, lambda c, v: c.ack(v))

    def change_invisible_duration(
        self, group: str, member: str, receipts: Sequence[str], seconds: float
    ) -> list[Outcome]:
        """Hand each receipt's message out again `seconds` from now unless acknowledged."""
        return self._settle(
            group, member, receipts, lambda c, v: c.change_invisible_duration(v, seconds)
        )

    def assigned(self, group: str, member: str) -> list[tuple[str, int]] | None:
        """Return the queues `member` of `group` reads now, or None if it is not serving."""
        entry = self._use(group, member)
        if entry is None:
            return None
        try:
            return entry.consumer.assigned()
        finally:
            self._release(entry)

    def leave(self, group: str, member: str) -> bool:
        """Have `member` of `group` closed once no call uses it (it leaves the group, its
        queues go to the others: a RocketMQ client's NotifyClientTermination); False if it
        is not here."""
        with self._lock:
            entry = self._members.get((group, member))
            if entry is None or entry.closing:
                return False
            entry.failed = True  # closed by the reaper's next round, as a failed one is
            return True

    # -- what metrics read ---------------------------------------------------------------
    def count(self) -> int:
        """Return the members alive (joining, or in their group) in this process."""
        with self._lock:
            return sum(not m.closing for m in self._members.values())

    def lag(self) -> dict[tuple[str, str], int]:
        """Return, per (group, topic), the messages not yet acknowledged in the queues this
        process's members read (bounded by the members: at most `max_members` pairs), as of
        each member's last call: a scrape never waits for a member that is reading."""
        found: Counter[tuple[str, str]] = Counter()
        with self._lock:
            for m in self._members.values():
                if m.started and not m.closing:
                    found[m.group, m.subscription.topic] += sum(m.lag.values())
        return dict(found)

    def topic_of(self, group: str, member: str) -> str | None:
        """Return the topic `member` of `group` reads, or None if no such member is alive."""
        with self._lock:
            entry = self._members.get((group, member))
            return None if entry is None or entry.closing else entry.subscription.topic

    def members(self) -> list[tuple[str, str]]:
        """Return the (group, member) of every member alive, sorted."""
        with self._lock:
            return sorted(key for key, m in self._members.items() if not m.closing)

    # -- life ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close every member (they store their offsets and leave their groups)."""
        self._stop.set()
        with self._lock:
            entries = [m for m in self._members.values() if not m.closing]
            for entry in entries:
                entry.closing = True
        for entry in entries:
            self._close(entry)
        if self._reaper is not None and self._reaper is not threading.current_thread():
            self._reaper.join(timeout=5)

    def reap(self) -> int:
        """Close the members idle for `idle_timeout` and the failed ones; return how many."""
        now = time.monotonic()
        with self._lock:
            done = [
                m
                for m in self._members.values()
                if not m.closing
                and m.users == 0
                and (m.failed or now - m.last_used > self.idle_timeout)
            ]
            for entry in done:
                entry.closing = True
        for entry in done:
            if not entry.failed:
                log.info(
                    "REST consumer %s of group %s idle for %.0f s: closed",
                    entry.name,
                    entry.group,
                    self.idle_timeout,
                )
            self._close(entry)
        return len(done)

    # -- inside --------------------------------------------------------------------------
    @contextmanager
    def _using_new(
        self,
        group: str,
        name: str,
        subscription: Subscription,
        invisible_seconds: float,
        start_from: str,
        *,
        holder: Principal | None,
    ) -> Iterator[_Member]:
        """Yield the started member `name` of `group`, made if absent; it is in use (never
        closed) until the block ends."""
        entry = self._take(group, name, subscription, invisible_seconds, start_from, holder=holder)
        try:
            with entry.start_lock:
                if not entry.started:
                    try:
                        self._offsets_topic_of(group)
                        entry.consumer.start()
                    except (*_UNAVAILABLE, ValueError) as exc:  # ValueError: a topic missing
                        self._fail(entry)
                        raise ConsumerUnavailableError(
                            f"member {name!r} of consumer group {group!r} cannot join: {exc}"
                        ) from exc
                    except BaseException:
                        self._fail(entry)
                        raise
                    entry.started = True
            yield entry
        finally:
            self._release(entry)

    def _offsets_topic_of(self, group: str) -> None:
        """Make `group`'s offsets topic unless made already (per-group layout). The ingress
        makes it, as the engine's principal, because no client may make one by writing: a
        broker that creates topics on first use would make it uncompacted
        (coordinator/kafka_clients/offsets_topic.py). Not under the lock: it is Kafka I/O."""
        if self._make_offsets_topic is None:
            return
        with self._lock:
            if group in self._offsets_topics:
                return
        self._make_offsets_topic(group)
        with self._lock:
            self._offsets_topics.add(group)

    def _take(
        self,
        group: str,
        name: str,
        subscription: Subscription,
        invisible_seconds: float,
        start_from: str,
        *,
        holder: Principal | None,
    ) -> _Member:
        """Return member `name` of `group` marked in use, made (not started) if absent."""
        with self._lock:
            if self._stop.is_set():
                raise ConsumerUnavailableError("the REST ingress is shutting down")
            entry = self._members.get((group, name))
            if entry is None:
                self._require_room(group, holder)
                consumer = self._make(group, name, subscription, invisible_seconds, start_from)
                entry = self._members[group, name] = _Member(
                    group, name, subscription, consumer, holder
                )
                self._start_reaper()
            elif entry.closing or entry.failed:
                raise ConsumerUnavailableError(
                    f"member {name!r} of consumer group {group!r} is being closed (idle, or "
                    "after a failure); retry in a moment and it is made anew"
                )
            elif entry.subscription != subscription:
                raise SubscriptionConflictError(
                    f"member {name!r} of consumer group {group!r} reads "
                    f"{entry.subscription.describe()}, not {subscription.describe()}: every "
                    "member keeps the subscription of its first receive (use another member "
                    f"id, or wait until this one is closed after {self.idle_timeout:.0f} s "
                    "without a call)"
                )
            entry.users += 1
            entry.last_used = time.monotonic()
            return entry

    def _require_room(self, group: str, holder: Principal | None) -> None:
        """Raise ConsumersFullError unless one more member of `group` by `holder` fits
        (lock held)."""
        if holder is not None and (
            sum(m.holder == holder for m in self._members.values()) >= self.per_group
        ):
            raise ConsumersFullError(
                f"token {holder.name!r} already has {self.per_group} REST members in this "
                "ingress, of every consumer group together (its share); reuse a member id "
                "(the `member` of an earlier answer), or retry once one was closed after "
                "being idle"
            )
        in_group = sum(g == group for g, _ in self._members)
        if in_group >= self.per_group:
            raise ConsumersFullError(
                f"consumer group {group!r} already has {self.per_group} REST members in this "
                "ingress (its share); reuse a member id (the `member` of an earlier answer), "
                "or retry once one was closed after being idle"
            )
        if len(self._members) >= self.max_members:
            raise ConsumersFullError(
                f"all {self.max_members} REST consumer members of this ingress are taken; "
                "retry once one was closed after being idle"
            )

    def _use(self, group: str, name: str) -> _Member | None:
        """Return member `name` of `group` marked in use if it is serving, else None."""
        with self._lock:
            entry = self._members.get((group, name))
            if entry is None or not entry.started or entry.closing or entry.failed:
                return None
            entry.users += 1
            entry.last_used = time.monotonic()
            return entry

    def _release(self, entry: _Member) -> None:
        # On the call's own thread, before the member is let go: it may wait for the
        # member's lock (another call of its client), which a metrics scrape never does.
        lag = entry.consumer.lag() if entry.started and not entry.failed else entry.lag
        with self._lock:
            entry.users -= 1
            entry.last_used = time.monotonic()
            entry.lag = lag

    def _fail(self, entry: _Member) -> None:
        """Have `entry` closed by the reaper once unused (never on a request's thread: the
        close of a broken consumer may wait for Kafka)."""
        with self._lock:
            entry.failed = True

    def _settle(
        self,
        group: str,
        name: str,
        receipts: Sequence[str],
        act: Callable[[SimpleConsumer, Receipt], bool],
    ) -> list[Outcome]:
        """Apply `act` to each receipt's message in `name`'s consumer, if the receipt is one
        this process issued to this very member (this incarnation)."""
        entry = self._use(group, name)
        try:
            outcomes = []
            for text in receipts:
                issued = self._codec.decode(text)
                if issued is None or (issued.group, issued.member) != (group, name):
                    outcomes.append(Outcome(False, "invalid_receipt"))
                elif entry is None:
                    outcomes.append(Outcome(False, "unknown_member"))
                elif issued.incarnation != entry.incarnation:
                    outcomes.append(Outcome(False, "stale"))
                elif act(entry.consumer, issued.receipt):
                    outcomes.append(Outcome(True))
                else:
                    outcomes.append(Outcome(False, self._why_not(entry, issued.receipt)))
            return outcomes
        finally:
            if entry is not None:
                self._release(entry)

    @staticmethod
    def _why_not(entry: _Member, receipt: Receipt) -> ReceiptReason:
        """Return why `receipt` did not count: its message is out again as a later delivery
        (`superseded`), or it is not in flight here any more (`stale`)."""
        attempt = entry.consumer.attempt_in_flight(receipt)
        return "superseded" if attempt is not None and attempt > receipt.attempt else "stale"

    def _close(self, entry: _Member) -> None:
        """Close `entry`'s consumer (offsets stored, group left), then forget it."""
        try:  # after a failed start too: it releases what the start opened
            entry.consumer.close()
        except Exception as exc:  # the group drops it after its session timeout anyway
            log.warning("closing REST consumer %s of group %s: %s", entry.name, entry.group, exc)
        with self._lock:
            if self._members.get((entry.group, entry.name)) is entry:
                del self._members[entry.group, entry.name]

    def _start_reaper(self) -> None:
        """Start the reaper thread with the first member (lock held)."""
        if self._reaper is None:
            self._reaper = threading.Thread(
                target=self._reap_until_closed, name="txcoord-rest-consumers", daemon=True
            )
            self._reaper.start()

    def _reap_until_closed(self) -> None:
        tick = min(1.0, self.idle_timeout / 4)
        while not self._stop.wait(tick):
            try:
                self.reap()
            except Exception:  # never let the reaper die: idle members would stay for ever
                log.exception("reaping idle REST consumers")

    def _simple_consumer(
        self,
        group: str,
        member: str,
        subscription: Subscription,
        invisible_seconds: float,
        start_from: str,
    ) -> SimpleConsumer:
        kafka = self.config.kafka
        return SimpleConsumer(
            group,
            {subscription.topic: subscription.tags},
            bootstrap_servers=kafka.bootstrap_servers,
            warehouse=self.config.warehouse,
            invisible_duration=invisible_seconds,
            orderly=subscription.orderly,
            start_from=start_from,
            member=member,
            deliveries_topic=kafka.deliveries_topic,
            offsets_topic=kafka.consumer_offsets_topic,
            topics_per_group=kafka.topics_per_group,
            security=kafka.security,
            # Polled only while its client calls: a session long enough that a busy host's
            # pauses between calls and slow joins do not expel it (its queues move 20 s after
            # an ingress dies uncleanly; a closed member leaves at once).
            session_timeout_ms=REST_SESSION_TIMEOUT_MS,
            # Each message handed out is kept until acknowledged: a client that never acks
            # must not pull its queues' backlog into the ingress's memory.
            max_unacked_messages=self.config.rest.max_unacked_messages,
            max_unacked_bytes=self.config.rest.max_unacked_size,
        )
