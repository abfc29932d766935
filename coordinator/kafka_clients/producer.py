"""A librdkafka producer whose records are each answered on their own: stored, or why not.

Two writers share it: the REST ingress's (coordinator/rest/kafka_writer.py, halves and ops
from producers) and the coordinator's check publisher (streams/kafka_io/check_publisher.py; its
records, and the delivery notices, in Kafka transactions: streams/kafka_io/kafka_fence.py). Both
must know of every record whether the broker has it (acks=all), say why not when it does
not (Kafka unreachable, or the record refused as too large), and answer in seconds while
Kafka is down instead of queueing silently. kafka-python's pure-Python producer did this at
several times librdkafka's CPU per record (docs/performance.md, decisions).

- `connect` makes a producer that has reached the cluster: a TCP connect first (librdkafka
  retries a refused connection every ~25 ms while a metadata request waits, and logged each:
  ~190 lines in 5 s), then a metadata request, retried in short slices so that an
  authentication failure ends the wait at once, with the login hint of
  core/kafka_security.AuthenticationWatch.
- One poller thread per producer serves librdkafka's callbacks: delivery reports settle each
  record of a `Call`, so a sending thread only waits; errors and librdkafka's own log go
  through Python logging.
- `produce` hands one record over, waiting for room in librdkafka's queue at most
  MAX_BLOCK_SECONDS; a record librdkafka itself refuses as too large fails alone.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from coordinator.core.errors import KafkaUnavailableError, RecordTooLargeError
from coordinator.core.kafka_security import AuthenticationWatch, KafkaSecurity, reachable
from coordinator.kafka_clients.options import librdkafka_options
from coordinator.protocol.check_record import Record

#: How long `connect` tries to reach the bootstrap servers.
BOOTSTRAP_TIMEOUT_MS = 5000
#: How long a send may wait for room in the producer's local queue.
MAX_BLOCK_SECONDS = 10.0
#: One metadata request's wait within `connect` (an authentication error ends it early).
_METADATA_SLICE_SECONDS = 0.5

TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})

#: Why one record was not acknowledged: Kafka unreachable (retry) or refused as too large.
WriteFailure = KafkaUnavailableError | RecordTooLargeError


@dataclass(frozen=True)
class Stored:
    """Where the broker stored a record, and when (its LogAppendTime, epoch ms)."""

    partition: int
    offset: int
    timestamp_ms: int


def failure(topic: str, error: KafkaError) -> WriteFailure:
    """Return what `error` means for one record sent to `topic`."""
    if error.code() in TOO_LARGE:
        return RecordTooLargeError(f"the broker refused the record as too large: {error.str()}")
    return KafkaUnavailableError(f"Kafka did not acknowledge the write to {topic}: {error.str()}")


def durable_config(
    bootstrap_servers: str,
    security: KafkaSecurity,
    *,
    client_id: str,
    max_record_bytes: int,
    ack_timeout_ms: int,
    linger_ms: int,
) -> dict[str, Any]:
    """Return the settings of an idempotent acks=all producer of records up to
    `max_record_bytes`, each acknowledged within `ack_timeout_ms` or failed."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "client.id": client_id,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": linger_ms,
        "message.max.bytes": max_record_bytes,
        "request.timeout.ms": min(ack_timeout_ms, 10_000),
        "message.timeout.ms": ack_timeout_ms,
        # The SDK's partitioner (kafka-python) and Kafka's Java client's, for keyed records.
        "partitioner": "murmur2_random",
        **librdkafka_options(security),
    }


class Call:
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
            self.settle(index, failure(self.topics[index], error), error.fatal())
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


class Client:
    """One librdkafka producer and the thread that serves its callbacks.

    `name` names the poller thread and the logs: `log` gets the producer's errors, the
    child logger `<log>.librdkafka` librdkafka's own lines (not stderr, its default).
    """

    def __init__(self, config: dict[str, Any], *, name: str, log: logging.Logger) -> None:
        self.broken = False
        self.auth_error: str | None = None
        self.name = name
        self._log = log
        self.producer = Producer(
            {**config, "error_cb": self._on_error, "logger": log.getChild("librdkafka")}
        )
        self._closing = threading.Event()
        self._poller = threading.Thread(target=self._poll, name=name, daemon=True)

    def start(self) -> None:
        """Start serving callbacks (delivery reports, errors, log lines)."""
        self._poller.start()

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._AUTHENTICATION and self.auth_error is None:
            self.auth_error = error.str()
        if error.fatal():
            # The idempotent producer cannot go on (librdkafka's fatal error): drop it.
            self._log.error("%s: the Kafka producer failed for good: %s", self.name, error.str())
            self.broken = True

    def _poll(self) -> None:
        while not self._closing.is_set():
            try:
                self.producer.poll(0.1)
            except KafkaException as exc:
                # A transactional producer's poll raises its fatal error (fenced by a newer
                # holder of its id, streams/kafka_io/kafka_fence.py): it is done, but the callbacks
                # of its last records are still served, until its owner closes it.
                if not self.broken:
                    self._on_error(exc.args[0])
                self.broken = True
                time.sleep(0.1)

    def close(self, timeout: float) -> None:
        """Wait up to `timeout` s for what is in flight, then stop; never raises.

        A transactional producer fenced by a newer holder of its id raises its fatal error
        from whichever call serves librdkafka's events next: the flush here as well, when
        that error comes while the fence is being handled (a gate run: a fenced check
        publisher's close raised `_FENCED` instead of the fence's WriterFencedError). Such a
        producer has nothing more to deliver.
        """
        if self._poller.is_alive():
            self._quietly(self.producer.flush, timeout)
        self._closing.set()
        if self._poller.is_alive():
            self._poller.join(5)
        self._quietly(self.producer.purge)
        self._quietly(self.producer.poll, 0)

    def _quietly(self, call: Any, *args: Any) -> None:
        """Run `call` of a producer being closed; its fatal error marks it broken, no more."""
        try:
            call(*args)
        except KafkaException as exc:
            self.broken = True
            self._log.info("%s: closed after a fatal error: %s", self.name, exc.args[0])


def connect(
    config: dict[str, Any],
    security: KafkaSecurity,
    *,
    name: str,
    log: logging.Logger,
    timeout_ms: int = BOOTSTRAP_TIMEOUT_MS,
) -> Client:
    """Return a started producer of `config` that has reached the cluster within `timeout_ms`.

    Raises KafkaUnavailableError (with a login hint after an authentication failure) if no
    bootstrap server accepts a connection, or none answers a metadata request, in time.
    """
    servers = config["bootstrap.servers"]
    deadline = time.monotonic() + timeout_ms / 1000
    while not reachable(servers, timeout=0.5):
        if time.monotonic() >= deadline:
            raise KafkaUnavailableError(
                f"Kafka at {servers} cannot be reached: no bootstrap server accepted a "
                f"connection within {timeout_ms / 1000:.0f} s"
            )
        time.sleep(0.2)
    client = Client(config, name=name, log=log)
    while True:
        try:
            # librdkafka connects lazily: a metadata request tells "reachable" now.
            remaining = deadline - time.monotonic()
            client.producer.list_topics(timeout=max(0.1, min(remaining, _METADATA_SLICE_SECONDS)))
            break
        except KafkaException as exc:
            client.producer.poll(0)  # serve the error callbacks (an authentication error)
            if client.auth_error is None and time.monotonic() < deadline:
                continue
            watch = AuthenticationWatch(servers, security)
            watch.refusal = client.auth_error
            client.close(timeout=0)
            raise KafkaUnavailableError(
                f"Kafka at {servers} cannot be reached: {exc.args[0].str()}{watch.hint}"
            ) from exc
    client.start()
    return client


def produce(
    client: Client,
    call: Call,
    index: int,
    topic: str,
    record: Record,
) -> WriteFailure | None:
    """Hand record `index` of `call` (key, value, headers) to the producer.

    Return a failure that should end the call's sending (no room in the local queue for
    MAX_BLOCK_SECONDS, or a fatal error); a record librdkafka refuses as too large is
    settled as such and sending goes on.
    """
    key, value, headers = record
    deadline = time.monotonic() + MAX_BLOCK_SECONDS
    while True:
        try:
            client.producer.produce(
                topic,
                value=value,
                key=key,
                headers=headers,  # type: ignore[arg-type]  # (list invariance)
                on_delivery=functools.partial(call.delivered, index),
            )
            return None
        except BufferError:  # the local queue is full: wait for deliveries to drain it
            if time.monotonic() >= deadline:
                return KafkaUnavailableError(
                    f"Kafka did not take the write to {topic} within "
                    f"{MAX_BLOCK_SECONDS:.0f} s: the producer's queue stayed full"
                )
            time.sleep(0.01)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() in TOO_LARGE:
                call.settle(index, failure(topic, error))
                return None
            call.fatal = call.fatal or error.fatal()
            return failure(topic, error)


def hand_over(client: Client, topics: Sequence[str], records: Sequence[Record]) -> Call:
    """Hand each record to the producer for its topic; return the call that settles them.

    Once a send fails otherwise than as too large, the rest are not tried: they would fail
    alike (each is settled with that failure).
    """
    call = Call(topics)
    failed: WriteFailure | None = None
    for index, (topic, record) in enumerate(zip(topics, records, strict=True)):
        if failed is None:
            failed = produce(client, call, index, topic, record)
        if failed is not None:
            call.settle(index, failed)
    return call


def send_each(
    client: Client,
    topics: Sequence[str],
    records: Sequence[Record],
    wait_seconds: float,
) -> list[Stored | WriteFailure]:
    """Send each record to its topic (`hand_over`), then wait up to `wait_seconds` for every
    outcome. After a fatal error `client` is marked broken: its owner replaces it."""
    call = hand_over(client, topics, records)
    outcomes = call.wait(wait_seconds)
    if call.fatal:
        client.broken = True
    return outcomes
