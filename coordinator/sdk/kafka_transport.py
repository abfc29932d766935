"""The Kafka adapter: halves and ops straight to the ingress topics, checks from the check topic.

Sends use an idempotent producer with acks="all": a receipt means the record is durable.

Checks are read by a consumer in group `txcoord-sdk-<producer group>`, so the producers of
one group share the check topic's partitions and a rebalance hands a stopped producer's
partitions to the live ones (RocketMQ: "the check goes to any live producer of the
group"). Records of other groups (header txcoord.producer_group) are skipped. Offsets are
committed only below the first request not yet answered (coordinator/sdk/offsets.py), so
a producer that dies mid-answer leaves the request to another one: at least once, and a
duplicate answer is harmless because the coordinator records it as a duplicate.
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
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.protocol import ingress as fmt
from coordinator.protocol.ingress import HEADER_ALLOWANCE_BYTES, msg_id_of, op_id_of
from coordinator.protocol.records import op_headers
from coordinator.sdk.errors import SdkError, TransportError
from coordinator.sdk.message import CheckRequest, Message
from coordinator.sdk.offsets import OffsetTracker, Partition
from coordinator.sdk.transport import DEFAULT_MAX_MESSAGE_SIZE, HalfReceipt, OpReceipt

log = logging.getLogger(__name__)

_DEFAULTS = KafkaConfig()


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

    def __init__(self, tracker: OffsetTracker) -> None:
        self._tracker = tracker

    def on_partitions_revoked(self, revoked: Any) -> None:
        """Do nothing yet: the next assignment says which partitions moved away."""

    def on_partitions_assigned(self, assigned: Any) -> None:
        """Forget the partitions that moved to another producer."""
        self._tracker.retain((tp.topic, tp.partition) for tp in assigned)
        log.info("check partitions assigned: %s", sorted(tp.partition for tp in assigned))

    def on_partitions_lost(self, lost: Any) -> None:
        """Forget everything: the group evicted us, our commits would be refused."""
        self._tracker.retain(())


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
    ) -> None:
        """Connect a producer and a check consumer (raises TransportError if Kafka is down).

        `auto_offset_reset="earliest"` makes a brand-new group read the check topic from
        its start: never miss a check, at the price of answering old ones once.
        `security` is the cluster's TLS/SASL settings (the `[kafka]` ones; default plaintext).
        `topics_per_group` (the `[kafka]` setting of a secured deployment) sends to and reads
        from the group's own topics, `<half_topic>.<group>` and so on (coordinator/core/topics.py);
        ValueError if the group's name cannot be a topic's.
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
                    **options,
                )
                self._consumer.subscribe(
                    [check_topic], listener=_KeepAssignedOffsets(self._tracker)
                )
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
        headers = message.half_headers(self.group, _now_ms())
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
        never make this group's wait as if the topic were quiet.
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
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                paused = consumer.paused()
                if paused:
                    consumer.resume(*paused)
                batches = consumer.poll(timeout_ms=remaining_ms, max_records=max_records)
            except KafkaError as exc:
                raise self._poll_failed(exc) from exc
            requests = self._take(batches)
            self._commit()
            if requests or not batches or time.monotonic() >= deadline:
                return requests

    def _poll_failed(self, exc: KafkaError) -> TransportError:
        return TransportError(f"polling check topic {self.check_topic} failed: {exc}")

    def _take(self, batches: dict[Any, list[Any]]) -> list[CheckRequest]:
        """Return the group's requests among polled records; track every record's offset."""
        requests = []
        for tp, records in batches.items():
            for record in records:
                partition = (tp.topic, tp.partition)
                self._tracker.taken(partition, record.offset)
                request = self._parse(record)
                if request is None:
                    self._tracker.done(partition, record.offset)
                else:
                    requests.append(request)
        return requests

    def _parse(self, record: Any) -> CheckRequest | None:
        """Return the record as a CheckRequest of our group, or None to skip it."""
        groups = [v for k, v in record.headers or [] if k == fmt.PRODUCER_GROUP]
        if groups != [self.group.encode()]:
            return None  # another group's check; its own producers answer it
        where = f"{record.topic}[{record.partition}]@{record.offset}"
        try:
            request = CheckRequest.from_json(
                record.value, source=(record.topic, record.partition, record.offset)
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

    def acknowledge(self, request: CheckRequest) -> None:
        """Let the request's offset be committed once everything before it is answered too."""
        if request.source is not None:
            topic, partition, offset = request.source
            self._tracker.done((topic, partition), offset)

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
            finally:
                self._producer.close(timeout=self.send_timeout_seconds)


def _as_commit(offsets: dict[Partition, int]) -> dict[Any, Any]:
    return {
        TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
        for (topic, partition), offset in offsets.items()
    }
