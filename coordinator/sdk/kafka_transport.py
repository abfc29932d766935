"""The Kafka adapter: halves and ops straight to the ingress topics, checks from the check topic.

Sends use an idempotent producer with acks="all": a receipt means the record is durable.

Checks are read by a consumer in group `txcoord-sdk-<producer group>`, so the producers of
one group share the check topic's partitions and a rebalance hands a stopped producer's
partitions to the live ones (RocketMQ: "the check goes to any live producer of the
group"). Records of other groups (header txcoord.producer_group) are skipped. Offsets are
committed only below the first request not yet answered (coordinator/sdk/offsets.py), so
a producer that dies mid-answer leaves the request to another one: at least once, and a
duplicate answer is harmless because the coordinator records it as a duplicate.

Checks go first to the instance that sent the half (coordinator/sdk/check_routing.py): with
an `instance`, the halves carry it, a second consumer outside the group reads every
partition for checks addressed to this instance, and a check this instance's partitions
hold for another instance waits `sender_first_seconds` for that instance's claim.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata

from coordinator.core.config import KafkaConfig
from coordinator.core.kafka_security import AuthenticationWatch, KafkaSecurity
from coordinator.core.topics import TopicLayout, check_consumer_group
from coordinator.kafka_clients.options import COMMITTED_ONLY, kafka_python_options
from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_claim import CheckClaim, is_claim
from coordinator.protocol.ingress import HEADER_ALLOWANCE_BYTES, msg_id_of, op_id_of
from coordinator.protocol.records import op_headers
from coordinator.sdk.check_routing import HeldChecks, addressed_to
from coordinator.sdk.errors import SdkError, TransportError
from coordinator.sdk.message import CheckRequest, Message
from coordinator.sdk.offsets import OffsetTracker, Partition
from coordinator.sdk.transport import DEFAULT_MAX_MESSAGE_SIZE, HalfReceipt, OpReceipt

log = logging.getLogger(__name__)

_DEFAULTS = KafkaConfig()
#: With sender-first routing, the longest single poll of either check consumer: how late a
#: check addressed to this instance, or a held one that came due, is seen.
_SLICE_MS = 100
#: How often the reader of addressed checks looks again for a check topic it could not see.
_ASSIGN_RETRY_SECONDS = 5.0
#: How often it asks whether partitions were added to the check topic (an operator's
#: `kafka-topics.sh --alter --partitions`): a check on a new one is read at most this late.
_PARTITIONS_REFRESH_SECONDS = 30.0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _stored_at(timestamp_ms: int) -> datetime:
    return datetime.fromtimestamp(timestamp_ms / 1000, UTC)


class _KeepAssignedOffsets(ConsumerRebalanceListener):  # type: ignore[misc]
    """Keep offset bookkeeping of the partitions we still own after a rebalance.

    No commit here: kafka-python runs these callbacks on its IO loop, where a blocking
    commit would stall heartbeats. The poller commits after every poll instead, so at most
    the last poll's answers are delivered again to the partition's next owner (harmless).
    A partition we keep stays tracked: kafka-python may keep its position, so its records
    are not delivered again and their acknowledgements must still count.
    """

    def __init__(self, tracker: OffsetTracker, held: HeldChecks) -> None:
        self._tracker = tracker
        self._held = held
        #: The partitions assigned now, for other threads (the consumer is not thread-safe).
        self.owned: frozenset[Partition] = frozenset()

    def on_partitions_revoked(self, revoked: Any) -> None:
        """Do nothing yet: the next assignment says which partitions moved away."""

    def on_partitions_assigned(self, assigned: Any) -> None:
        """Forget the partitions that moved to another producer."""
        kept = [(tp.topic, tp.partition) for tp in assigned]
        self.owned = frozenset(kept)
        self._tracker.retain(kept)
        self._held.retain(kept)
        log.info("check partitions assigned: %s", sorted(tp.partition for tp in assigned))

    def on_partitions_lost(self, lost: Any) -> None:
        """Forget everything: the group evicted us, our commits would be refused."""
        self.owned = frozenset()
        self._tracker.retain(())
        self._held.retain(())


class KafkaTransport:
    """Transport over Kafka for producer group `group`; see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        *,
        half_topic: str = _DEFAULTS.half_topic,
        op_topic: str = _DEFAULTS.op_topic,
        check_topic: str = _DEFAULTS.check_topic,
        topics_per_group: bool = False,
        send_timeout_seconds: float = 30.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        auto_offset_reset: str = "earliest",
        security: KafkaSecurity | None = None,
        instance: str | None = None,
        sender_first_seconds: float = 2.0,
    ) -> None:
        """Connect a producer and a check consumer (raises TransportError if Kafka is down).

        `auto_offset_reset="earliest"` makes a brand-new group read the check topic from
        its start: never miss a check, at the price of answering old ones once.
        `security` is the cluster's TLS/SASL settings (the `[kafka]` ones; default plaintext).
        `topics_per_group` (the `[kafka]` setting of a secured deployment) sends to and reads
        from the group's own topics, `<half_topic>.<group>` and so on (coordinator/core/topics.py);
        ValueError if the group's name cannot be a topic's.
        `instance` is this producer instance's id (None: no sender-first routing), and
        `sender_first_seconds` how long a check addressed to another instance waits for it.
        """
        layout = TopicLayout(
            half=half_topic, op=op_topic, check=check_topic, per_group=topics_per_group
        )
        half_topic, op_topic = layout.half_topic(group), layout.op_topic(group)
        check_topic = layout.check_topic(group)
        options = kafka_python_options(security)
        self.group = group
        self.half_topic = half_topic
        self.op_topic = op_topic
        self.check_topic = check_topic
        self.send_timeout_seconds = send_timeout_seconds
        self._tracker = OffsetTracker()
        self.instance = instance
        self._held = HeldChecks(instance or "", sender_first_seconds if instance else 0.0)
        self._direct: Any = None  # the reader of checks addressed to this instance
        self._direct_assigned_at: float | None = None
        self._direct_from_end = True
        self._closed = False
        self._close_lock = threading.Lock()
        client_id = f"txcoord-sdk-{group}-{uuid.uuid4().hex[:8]}"
        timeout_ms = int(send_timeout_seconds * 1000)
        # A refused login is retried until the timeout; the watch makes the error say so.
        with AuthenticationWatch(bootstrap_servers, security) as watch:
            try:
                self._producer = KafkaProducer(
                    bootstrap_servers=bootstrap_servers,
                    client_id=client_id,
                    acks="all",
                    enable_idempotence=True,
                    max_request_size=max_message_size + HEADER_ALLOWANCE_BYTES,
                    request_timeout_ms=min(30_000, timeout_ms),
                    delivery_timeout_ms=timeout_ms,
                    bootstrap_timeout_ms=timeout_ms,
                    **options,
                )
            except KafkaError as exc:
                raise TransportError(
                    f"cannot connect to Kafka at {bootstrap_servers}: {exc}{watch.hint}"
                ) from exc
            self._consumer: Any = None
            try:
                self._consumer = KafkaConsumer(
                    bootstrap_servers=bootstrap_servers,
                    client_id=client_id,
                    group_id=check_consumer_group(group),
                    enable_auto_commit=False,
                    auto_offset_reset=auto_offset_reset,
                    bootstrap_timeout_ms=timeout_ms,
                    **COMMITTED_ONLY,  # a fenced coordinator's checks are aborted
                    **options,
                )
                self._rebalances = _KeepAssignedOffsets(self._tracker, self._held)
                self._consumer.subscribe([check_topic], listener=self._rebalances)
                # Refresh metadata after subscribing and before the first join. Otherwise
                # kafka-python 3.0 takes its "metadata used for the assignment" snapshot before it
                # knows the topic, sees the snapshot change right after, and rebalances again; if
                # a short poll times out inside that second rebalance, the group leader never
                # applies its own new assignment (seen in our tests: a partition nobody reads).
                known = self._consumer.topics()
                if check_topic not in known:
                    log.warning(
                        "check topic %s does not exist yet; checks are answered once it does",
                        check_topic,
                    )
                if instance is not None:
                    self._direct = KafkaConsumer(
                        bootstrap_servers=bootstrap_servers,
                        client_id=client_id,
                        group_id=None,
                        enable_auto_commit=False,
                        bootstrap_timeout_ms=timeout_ms,
                        **COMMITTED_ONLY,
                        **options,
                    )
                    # Only checks of halves sent from now on can name this instance: from
                    # the end, or from the start of a check topic made after this start.
                    self._direct_from_end = check_topic in known
                    self._assign_direct()
            except KafkaError as exc:
                self._release()
                raise TransportError(
                    f"cannot connect to Kafka at {bootstrap_servers}: {exc}{watch.hint}"
                ) from exc
        missing = [t for t in (half_topic, op_topic) if t not in known]
        if topics_per_group and missing:
            self._release()
            raise TransportError(
                f"the topics of producer group {group!r} do not exist (or this principal may "
                f"not see them): {', '.join(missing)}. In the per-group layout they are created "
                f"beforehand: `txcoord up --auth-file` does it for every group of the file, "
                f"`txcoord provision --group {group}` on another cluster (docs/security.md, "
                f"'Groups kept apart by the broker')"
            )

    def _release(self) -> None:
        """Close the clients of a transport that failed to start."""
        if self._direct is not None:
            self._direct.close(autocommit=False)
        if self._consumer is not None:
            self._consumer.close(autocommit=False)
        self._producer.close(timeout=5)

    # -- sending ------------------------------------------------------------------------
    def _send(self, topic: str, key: str, value: bytes, headers: list[tuple[str, bytes]]) -> Any:
        try:
            future = self._producer.send(topic, key=key.encode(), value=value, headers=headers)
            return future.get(timeout=self.send_timeout_seconds + 5)
        except KafkaError as exc:
            raise self._store_failed(key, topic, exc)  # noqa: B904 (it carries its cause)

    @staticmethod
    def _store_failed(key: str, topic: str, exc: KafkaError) -> TransportError:
        """The error for a record Kafka did not store, its cause set (returned or raised)."""
        error = TransportError(
            f"Kafka did not store the record for {key} in {topic}: {exc}",
            retriable=bool(getattr(exc, "retriable", False)),
        )
        error.__cause__ = exc
        return error

    def send_half(self, message: Message, transaction_id: str) -> HalfReceipt:
        """Write the half record and wait for acks=all."""
        headers = message.half_headers(self.group, _now_ms(), self.instance)
        stored = self._send(self.half_topic, transaction_id, message.body, headers)
        return HalfReceipt(
            transaction_id=transaction_id,
            msg_id=msg_id_of(stored.partition, stored.offset),
            stored_at=_stored_at(stored.timestamp),
            partition=stored.partition,
            offset=stored.offset,
        )

    def send_op(self, transaction_id: str, op: str, from_check: bool) -> OpReceipt:
        """Write the op record and wait for acks=all."""
        (result,) = self.send_ops([(transaction_id, op, from_check)])
        if isinstance(result, SdkError):
            raise result
        return result

    def send_ops(self, ops: Sequence[tuple[str, str, bool]]) -> list[OpReceipt | SdkError]:
        """Write op records (transaction id, op, from_check) together; wait for each one's acks.

        The records go out before the first wait, so they share produce requests: a batch of
        answers costs the producer about what one answer does. One result per op, in order:
        its receipt, or the TransportError that stopped it (the others are unaffected).
        """
        now = _now_ms()
        sent: list[Any] = []
        for transaction_id, op, from_check in ops:
            headers = op_headers(self.group, op, from_check, now)
            try:
                sent.append(
                    self._producer.send(
                        self.op_topic, key=transaction_id.encode(), value=b"", headers=headers
                    )
                )
            except KafkaError as exc:
                sent.append(self._store_failed(transaction_id, self.op_topic, exc))
        results: list[OpReceipt | SdkError] = []
        for (transaction_id, op, _), future in zip(ops, sent, strict=True):
            if isinstance(future, SdkError):
                results.append(future)
                continue
            try:
                stored = future.get(timeout=self.send_timeout_seconds + 5)
            except KafkaError as exc:
                results.append(self._store_failed(transaction_id, self.op_topic, exc))
                continue
            results.append(
                OpReceipt(
                    transaction_id=transaction_id,
                    op=op,
                    op_id=op_id_of(stored.partition, stored.offset),
                    stored_at=_stored_at(stored.timestamp),
                )
            )
        return results

    # -- checks -------------------------------------------------------------------------
    def poll_checks(self, max_records: int, wait_seconds: float) -> list[CheckRequest]:
        """Return up to `max_records` of the group's check requests; 0 pauses, keeping the group.

        Waits up to `wait_seconds` for a request of the group: records of other groups (the
        check topic is shared) are skipped and polling goes on, so a busy neighbour's checks
        never make this group's wait as if the topic were quiet. With sender-first routing
        the wait is cut into short polls of both consumers: a check addressed to this
        instance, or a held one that came due, is returned within _SLICE_MS.
        """
        consumer = self._consumer
        if max_records <= 0:
            try:
                # Backpressure: stop fetching, but keep polling so the group does not evict us
                # (max.poll.interval.ms) and hand our partitions to someone else in a loop.
                assigned = consumer.assignment()
                if assigned:
                    consumer.pause(*assigned)
                consumer.poll(timeout_ms=0)
            except KafkaError as exc:
                raise self._poll_failed(exc) from exc
            self._commit()
            return []
        deadline = time.monotonic() + wait_seconds
        while True:
            requests = self._addressed(max_records)
            requests += self._held.due(max_records - len(requests))
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            if self._direct is not None:
                remaining_ms = 0 if requests else min(remaining_ms, _SLICE_MS)
            batches: dict[Any, list[Any]] = {}
            if len(requests) < max_records:
                try:
                    paused = consumer.paused()
                    if paused:
                        consumer.resume(*paused)
                    batches = consumer.poll(
                        timeout_ms=remaining_ms, max_records=max_records - len(requests)
                    )
                except KafkaError as exc:
                    raise self._poll_failed(exc) from exc
                requests += self._take(batches)
            self._commit()
            if requests or time.monotonic() >= deadline:
                return requests
            if not batches and self._direct is None:
                return requests

    def _poll_failed(self, exc: KafkaError) -> TransportError:
        return TransportError(f"polling check topic {self.check_topic} failed: {exc}")

    def _take(self, batches: dict[Any, list[Any]]) -> list[CheckRequest]:
        """Return the group's requests to answer now among polled records.

        Every record's offset is tracked; a check held for the instance that sent its half
        stays open until that instance claims it or the delay is over; a claim closes what it
        claims.
        """
        requests = []
        for tp, records in batches.items():
            for record in records:
                partition = (tp.topic, tp.partition)
                self._tracker.taken(partition, record.offset)
                if is_claim(record.headers):
                    self._tracker.done(partition, record.offset)
                    self._close_claimed(record)
                    continue
                request = self._parse(record)
                if request is None:
                    self._tracker.done(partition, record.offset)
                elif not self._held.hold(request):
                    requests.append(request)
        return requests

    def _close_claimed(self, record: Any) -> None:
        try:
            claim = CheckClaim.decode(record.value)
        except ValueError as exc:
            log.debug("skipping a malformed check claim at offset %d: %s", record.offset, exc)
            return
        if claim.producer_group != self.group:
            return
        for request in self._held.claimed(claim):
            self.acknowledge(request)

    def _parse(self, record: Any, addressed: bool = False) -> CheckRequest | None:
        """Return the record as a CheckRequest of our group, or None to skip it."""
        groups = [v for k, v in record.headers or [] if k == fmt.PRODUCER_GROUP]
        if groups != [self.group.encode()]:
            return None  # another group's check (or a claim); its own producers answer it
        where = f"{record.topic}[{record.partition}]@{record.offset}"
        try:
            request = CheckRequest.from_json(
                record.value,
                source=(record.topic, record.partition, record.offset),
                addressed=addressed,
            )
        except ValueError as exc:
            log.warning("skipping malformed check request %s: %s", where, exc)
            return None
        if request.producer_group != self.group:
            log.warning(
                "skipping check request %s: header says group %s, value says %s",
                where,
                self.group,
                request.producer_group,
            )
            return None
        return request

    # -- checks addressed to this instance -------------------------------------------------
    def _assign_direct(self) -> None:
        """Read every partition of the check topic, from its end or (a new topic) its start;
        a partition added since the last assignment from its start, the others from where
        they were."""
        self._direct_assigned_at = time.monotonic()  # not there yet: again in a while
        partitions = self._direct.partitions_for_topic(self.check_topic)
        if not partitions:
            return
        assignment = [TopicPartition(self.check_topic, p) for p in sorted(partitions)]
        before = set(self._direct.assignment())
        if before:
            if before == set(assignment):
                return
            # assign() forgets every position: keep the old partitions' own.
            where = {tp: self._direct.position(tp) for tp in before}
            self._direct.assign(assignment)
            for tp, offset in where.items():
                if tp in set(assignment):
                    self._direct.seek(tp, offset)
            added = [tp for tp in assignment if tp not in before]
            if added:  # (with no argument, seek_to_beginning would rewind them all)
                self._direct.seek_to_beginning(*added)  # every check on one is newer than us
                log.info("reading %d new partition(s) of %s", len(added), self.check_topic)
            return
        self._direct.assign(assignment)
        if self._direct_from_end:
            self._direct.seek_to_end(*assignment)
        else:
            self._direct.seek_to_beginning(*assignment)

    def _addressed(self, max_records: int) -> list[CheckRequest]:
        """Return checks addressed to this instance, read outside the group (no wait)."""
        direct = self._direct
        if direct is None or max_records <= 0:
            return []
        last = self._direct_assigned_at
        since = None if last is None else time.monotonic() - last
        if direct.assignment() and (since is None or since >= _PARTITIONS_REFRESH_SECONDS):
            try:
                direct.topics()  # refreshes the metadata: partitions added since
                self._assign_direct()
            except KafkaError as exc:
                self._direct_assigned_at = time.monotonic()
                log.debug("the check topic's partitions could not be listed: %s", exc)
        if not direct.assignment():
            if since is None or since >= _ASSIGN_RETRY_SECONDS:
                try:
                    direct.topics()  # refreshes the metadata
                    self._assign_direct()
                except KafkaError as exc:
                    log.debug("the check topic is not readable yet: %s", exc)
            if not direct.assignment():
                return []
        try:
            batches = direct.poll(timeout_ms=0, max_records=max_records)
        except KafkaError as exc:
            raise self._poll_failed(exc) from exc
        requests = []
        assert self.instance is not None
        for records in batches.values():
            for record in records:
                if addressed_to(self.instance, self.group, record.headers):
                    request = self._parse(record, addressed=True)
                    if request is not None:
                        requests.append(request)
        return requests

    def acknowledge(self, request: CheckRequest) -> None:
        """Let the request's offset be committed once everything before it is answered too.

        A check read as addressed to this instance is claimed instead: its partition's
        owner, which holds it for us, lets it go.
        """
        if request.source is None:
            return
        topic, partition, offset = request.source
        if not request.addressed:
            self._tracker.done((topic, partition), offset)
        elif (topic, partition) not in self._rebalances.owned:
            self._claim(request, partition)

    def _claim(self, request: CheckRequest, partition: int) -> None:
        """Append a claim after the check in its partition; best effort (a lost one costs a
        second answer)."""
        assert self.instance is not None
        key, value, headers = CheckClaim(
            request.transaction_id, request.check_number, self.group, self.instance
        ).encode()
        try:
            future = self._producer.send(
                self.check_topic, key=key, value=value, headers=headers, partition=partition
            )
        except KafkaError as exc:
            log.warning("claiming check %s failed: %s", request.key, exc)
            return
        future.add_errback(
            lambda exc: log.warning("claiming check %s failed: %s", request.key, exc)
        )

    def _commit(self) -> None:
        offsets = self._tracker.committable()
        if not offsets:
            return
        try:
            self._consumer.commit(_as_commit(offsets))
        except CommitFailedError as exc:
            # The partitions moved to another producer, which starts from the last commit.
            log.info("check offsets not committed after a rebalance: %s", exc)
        except KafkaError as exc:
            log.warning("committing check offsets failed (will retry): %s", exc)
        else:
            self._tracker.committed(offsets)

    def close(self) -> None:
        """Commit answered checks, leave the consumer group, flush and close the producer."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._commit()
        finally:
            try:
                self._consumer.close(autocommit=False)
                if self._direct is not None:
                    self._direct.close(autocommit=False)
            finally:
                self._producer.close(timeout=self.send_timeout_seconds)


def _as_commit(offsets: dict[Partition, int]) -> dict[Any, Any]:
    return {
        TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
        for (topic, partition), offset in offsets.items()
    }
