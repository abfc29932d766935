"""One idempotent producer for every request: a record is acknowledged only once durable.

`acks=all` with idempotence (SPEC 7.7): a 201/202 is sent after the broker has written the
record to every in-sync replica, and the producer's own retries never duplicate or reorder
it. A batch is answered record by record (`send_halves`, `send_ops`): each record's outcome
is its own broker acknowledgement or failure, so the caller can say exactly which records
are durable.

The producer is librdkafka's (confluent-kafka): kafka-python's pure-Python producer was 40%
of the REST ingress's CPU under load (README "Performance"). One poller thread serves its
delivery callbacks, which settle each call's records; a request thread only waits. The
producer is created on first use and must reach the cluster within BOOTSTRAP_TIMEOUT_MS (a
TCP connect, then a metadata request: librdkafka itself would queue records silently until
their delivery timeout), so the REST starts, and answers 503 in seconds while Kafka is down,
and recovers once it is back; a producer that failed for good is dropped and the next
request builds a new one. Records are partitioned by murmur2 of their key, as Kafka's Java
client and the SDK (kafka-python) do.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from coordinator.rest.records import Record
from core.errors import KafkaUnavailableError, RecordTooLargeError
from core.kafka_clients import librdkafka_options
from core.kafka_security import AuthenticationWatch, KafkaSecurity, reachable
from core.topics import TopicLayout
from protocol import ingress as fmt
from protocol.ingress import HEADER_ALLOWANCE_BYTES

log = logging.getLogger("txcoord.rest.kafka")
#: librdkafka's own log lines (a refused connection, ...), served by the poller thread:
#: through logging, not straight to stderr as librdkafka writes them by default.
librdkafka_log = logging.getLogger("txcoord.rest.kafka.librdkafka")

#: How long a new producer tries to reach the bootstrap servers.
BOOTSTRAP_TIMEOUT_MS = 5000
#: How long a send may wait for room in the producer's local queue.
MAX_BLOCK_SECONDS = 10.0

_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


#: Why one record was not acknowledged: Kafka unreachable (retry) or refused as too large.
WriteFailure = KafkaUnavailableError | RecordTooLargeError


@dataclass(frozen=True)
class Stored:
    """Where the broker stored a record, and when (its LogAppendTime, epoch ms)."""

    partition: int
    offset: int
    timestamp_ms: int


def _failure(topic: str, error: KafkaError) -> WriteFailure:
    """Return what `error` means for one record."""
    if error.code() in _TOO_LARGE:
        return RecordTooLargeError(f"the broker refused the record as too large: {error.str()}")
    return KafkaUnavailableError(f"Kafka did not acknowledge the write to {topic}: {error.str()}")


class _Call:
    """The outcomes of one call's records, settled by delivery callbacks (any thread)."""

    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = topics
        self.outcomes: list[Stored | WriteFailure | None] = [None] * len(topics)
        self.fatal = False
        self._left = len(topics)
        self._lock = threading.Lock()
        self._done = threading.Event()
        if not topics:
            self._done.set()

    def settle(self, index: int, outcome: Stored | WriteFailure, fatal: bool = False) -> None:
        """Record the outcome of record `index` (once)."""
        with self._lock:
            if self.outcomes[index] is not None:
                return
            self.outcomes[index] = outcome
            self.fatal = self.fatal or fatal
            self._left -= 1
            if self._left == 0:
                self._done.set()

    def delivered(self, index: int, error: KafkaError | None, message: Message) -> None:
        """librdkafka's delivery callback of record `index`."""
        if error is not None:
            self.settle(index, _failure(self.topics[index], error), error.fatal())
            return
        _, timestamp_ms = message.timestamp()
        offset, partition = message.offset(), message.partition()
        self.settle(index, Stored(partition, offset, timestamp_ms))  # type: ignore[arg-type]

    def wait(self, seconds: float) -> list[Stored | WriteFailure]:
        """Return every outcome; records unsettled after `seconds` count as unavailable."""
        if not self._done.wait(seconds):
            for index, topic in enumerate(self.topics):
                late = f"Kafka did not acknowledge the write to {topic} within {seconds:.0f} s"
                self.settle(index, KafkaUnavailableError(late))
        return [outcome for outcome in self.outcomes if outcome is not None]


class _Client:
    """One librdkafka producer and the thread that serves its callbacks."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.broken = False
        self.auth_error: str | None = None
        self.producer = Producer({**config, "error_cb": self._on_error,
                                  "logger": librdkafka_log})  # fmt: skip
        self._closing = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="rest-kafka-acks", daemon=True)

    def start(self) -> None:
        self._poller.start()

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._AUTHENTICATION and self.auth_error is None:
            self.auth_error = error.str()
        if error.fatal():
            # The idempotent producer cannot go on (librdkafka's fatal error): drop it.
            log.error("the REST ingress's Kafka producer failed for good: %s", error.str())
            self.broken = True

    def _poll(self) -> None:
        while not self._closing.is_set():
            self.producer.poll(0.1)

    def close(self, timeout: float) -> None:
        """Wait up to `timeout` s for what is in flight, then stop."""
        if self._poller.is_alive():
            self.producer.flush(timeout)
        self._closing.set()
        if self._poller.is_alive():
            self._poller.join(5)
        self.producer.purge()
        self.producer.poll(0)


class KafkaWriter:
    """Write half and op records through one shared idempotent producer; thread-safe."""

    def __init__(
        self,
        bootstrap_servers: str,
        layout: TopicLayout,
        *,
        max_message_size: int,
        ack_timeout: timedelta = timedelta(seconds=30),
        client_id: str = "txcoord-rest",
        security: KafkaSecurity | None = None,
        ensure_group_topics: Callable[[str], object] | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.security = security or KafkaSecurity()
        #: Where each record goes: the shared topics, or its group's own (core/topics.py).
        self.layout = layout
        # Creates a group's topics before its first record (per-group layout), if given.
        self._ensure_group_topics = ensure_group_topics
        self._groups_ready: set[str] = set()
        self.max_message_size = max_message_size
        self.ack_timeout = ack_timeout
        self.client_id = client_id
        self._lock = threading.Lock()
        self._client: _Client | None = None

    def send_half(self, record: Record) -> Stored:
        """Write one half message; return where it was stored once acknowledged."""
        return _stored_or_raise(self.send_halves([record])[0])

    def send_op(self, record: Record) -> Stored:
        """Write one op record; return where it was stored once acknowledged."""
        return _stored_or_raise(self.send_ops([record])[0])

    def send_halves(self, records: Sequence[Record]) -> list[Stored | WriteFailure]:
        """Write several half messages; return each one's outcome, in order."""
        return self._send_each([self._topic(self.layout.half_topic, r) for r in records], records)

    def send_ops(self, records: Sequence[Record]) -> list[Stored | WriteFailure]:
        """Write several op records; return each one's outcome, in order.

        An operator's op (the admin token's) goes to the shared op topic, which only the
        engine's principal may write in the per-group layout.
        """
        return self._send_each(
            [self.layout.op if _header(r, fmt.OPERATOR) is not None
             else self._topic(self.layout.op_topic, r) for r in records],
            records,
        )  # fmt: skip

    def _topic(self, topic_of: Callable[[str], str], record: Record) -> str:
        """Return the topic of `record`'s group, created first in the per-group layout."""
        group = _header(record, fmt.PRODUCER_GROUP) or ""
        topic = topic_of(group)  # ValueError: a name no group topic can hold (checked before)
        if self.layout.per_group and group not in self._groups_ready:
            if self._ensure_group_topics is not None:
                self._ensure_group_topics(group)
            self._groups_ready.add(group)
        return topic

    def close(self) -> None:
        """Flush and close the producer, if one was made."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close(timeout=10)

    def _config(self) -> dict[str, Any]:
        ack_ms = int(self.ack_timeout.total_seconds() * 1000)
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 1,
            # A record is the body plus headers: as large as the topics allow.
            "message.max.bytes": self.max_message_size + HEADER_ALLOWANCE_BYTES,
            "request.timeout.ms": min(ack_ms, 10_000),
            "message.timeout.ms": ack_ms,
            # The SDK's partitioner (kafka-python) and Kafka's Java client's, for keyed records.
            "partitioner": "murmur2_random",
            **librdkafka_options(self.security),
        }

    def _client_or_new(self) -> _Client:
        with self._lock:
            if self._client is not None and not self._client.broken:
                return self._client
            broken, self._client = self._client, None
            if broken is not None:
                broken.close(timeout=0)
            deadline = time.monotonic() + BOOTSTRAP_TIMEOUT_MS / 1000
            # A TCP connect first: librdkafka retries a refused connection every ~25 ms
            # while a metadata request waits, logging each (~190 lines in 5 s).
            while not reachable(self.bootstrap_servers, timeout=0.5):
                if time.monotonic() >= deadline:
                    raise KafkaUnavailableError(
                        f"Kafka at {self.bootstrap_servers} cannot be reached: no bootstrap "
                        f"server accepted a connection within {BOOTSTRAP_TIMEOUT_MS / 1000:.0f} s"
                    )  # fmt: skip
                time.sleep(0.2)
            client = _Client(self._config())
            watch = AuthenticationWatch(self.bootstrap_servers, self.security)
            try:
                # librdkafka connects lazily: a metadata request tells "reachable" now.
                client.producer.list_topics(timeout=max(0.5, deadline - time.monotonic()))
            except KafkaException as exc:
                client.producer.poll(0)  # serve the error callbacks (an authentication error)
                watch.refusal = client.auth_error
                client.close(timeout=0)
                raise KafkaUnavailableError(
                    f"Kafka at {self.bootstrap_servers} cannot be reached: "
                    f"{exc.args[0].str()}{watch.hint}"
                ) from exc
            client.start()
            self._client = client
            return client

    def _discard(self, client: _Client) -> None:
        """Drop `client` after a fatal error; the next request makes a new one."""
        with self._lock:
            if self._client is client:
                self._client = None
        try:
            client.close(timeout=0)
        except Exception:  # closing a broken producer is best effort
            log.debug("closing a failed producer", exc_info=True)

    def _send_each(
        self, topics: Sequence[str], records: Sequence[Record]
    ) -> list[Stored | WriteFailure]:
        """Send every record to its topic, then wait for each acknowledgement, in order.

        Raises KafkaUnavailableError only when no producer can be made (nothing was sent).
        A record the producer refuses itself as too large fails alone; once a send fails
        otherwise (no room in the local queue for MAX_BLOCK_SECONDS, or a fatal error), the
        rest are not tried: they would fail alike.
        """
        client = self._client_or_new()
        call = _Call(topics)
        failed: WriteFailure | None = None
        for index, (topic, r) in enumerate(zip(topics, records, strict=True)):
            if failed is None:
                failed = self._produce(client, call, index, topic, r)
            if failed is not None:
                call.settle(index, failed)
        outcomes = call.wait(self.ack_timeout.total_seconds() + 5)
        if call.fatal or client.broken:
            # Only now, once every record of this call has its outcome.
            self._discard(client)
        return outcomes

    def _produce(
        self, client: _Client, call: _Call, index: int, topic: str, record: Record
    ) -> WriteFailure | None:
        """Hand one record to the producer; return a failure that ends the call's sending."""
        deadline = time.monotonic() + MAX_BLOCK_SECONDS
        while True:
            try:
                client.producer.produce(
                    topic, value=record.value, key=record.key,
                    headers=record.headers,  # type: ignore[arg-type]  # (list invariance)
                    on_delivery=functools.partial(call.delivered, index),
                )  # fmt: skip
                return None
            except BufferError:  # the local queue is full: wait for deliveries to drain it
                if time.monotonic() >= deadline:
                    return KafkaUnavailableError(
                        f"Kafka did not take the write to {topic} within "
                        f"{MAX_BLOCK_SECONDS:.0f} s: the producer's queue stayed full"
                    )  # fmt: skip
                time.sleep(0.01)
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.code() in _TOO_LARGE:
                    call.settle(index, _failure(topic, error))
                    return None
                call.fatal = call.fatal or error.fatal()
                return _failure(topic, error)


def _header(record: Record, name: str) -> str | None:
    """Return header `name` of `record` as text, or None if absent."""
    return next((value.decode() for key, value in record.headers if key == name), None)


def _stored_or_raise(outcome: Stored | WriteFailure) -> Stored:
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
