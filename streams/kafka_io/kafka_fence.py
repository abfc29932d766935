"""The engine's Kafka writes fenced like its Delta writes: transactional ids shared per warehouse.

The writer epoch (streams/writes/writer_fence.py) keeps an older coordinator out of the warehouse;
Kafka knows nothing of it. So the check records (streams/kafka_io/check_publisher.py) and delivery
notices (streams/kafka_io/delivery_notices.py) an older coordinator publishes are kept out Kafka's
own way (KIP-98), as Kafka fences a zombie producer: each is sent by a transactional producer
whose `transactional.id` is derived from the warehouse (coordinator/core/topics.py
`transactional_id`), so every coordinator of the warehouse shares it. A producer's
`init_transactions` bumps the id's epoch and aborts whatever transaction an earlier holder
left open; from then on the broker refuses that holder's sends and commits. Every reader of
those topics reads committed only (coordinator/kafka_clients/options.py COMMITTED_ONLY): what
a fenced producer sent in a transaction it never committed, nobody reads.

The order that makes "a fenced coordinator publishes nothing after the newer one's claim" hold:

- **Kafka first, then the warehouse.** A coordinator takes both ids (`start`) before it
  claims its writer epoch (streams/query/decision_query.py; a rebuild's claim too,
  streams/state/rebuild.py): from the newer one's claim on, the older one's producers are
  already fenced, and its open transaction aborted.
- **Fenced: ask the warehouse, never take the id back from a newer claim.** A producer the
  broker fenced does not start a fresh one of the same id at once: that would fence the newer
  coordinator in turn, which would do the same (ping-pong). It asks the writer fence
  (`WriterFence.notice`) instead: a newer claim raises WriterFencedError, and the engine stops
  as fenced (exit code 3). Only if none appears within CLAIM_WAIT_SECONDS (the start that
  fenced it died before its claim; a broker that aborted a transaction for good) is it an
  ordinary failure, which the owner retries with a fresh producer.
- **An init after the claim is checked on both sides**: the warehouse is asked before it
  (no id taken back from a newer coordinator) and after it (a claim made meanwhile).

One window stays: a producer that took its id back because no claim came within
CLAIM_WAIT_SECONDS, while the start that fenced it claims later still (several starts racing
for one epoch, streams/writes/writer_fence.py CLAIM_PATIENCE_S), may commit one batch's records
after that claim; its next batch's notice stops it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from confluent_kafka import KafkaError, KafkaException

from coordinator.core.errors import ConfigurationError, KafkaUnavailableError, RecordTooLargeError
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.kafka_clients.producer import Client, Stored, WriteFailure, connect, hand_over
from coordinator.protocol.check_record import Record

if TYPE_CHECKING:
    from streams.writes.writer_fence import WriterFence

__all__ = [
    "CLAIM_WAIT_SECONDS",
    "TRANSACTION_TIMEOUT_MS",
    "FencedProducer",
    "FencedSender",
    "transactional",
]

#: How long a transaction may stay open before the broker aborts it. Above the longest send
#: and commit (a check record's 30 s acknowledgement, streams/kafka_io/check_publisher.py): a longer
#: one would be aborted under a producer still sending. Not much above it: a read_committed
#: reader waits behind an open transaction, and one left open by a coordinator killed
#: mid-send holds every reader of its partitions until the restart's init aborts it, or
#: until this passes (Kafka's default: 60 s too, said here so that it is not changed alone).
TRANSACTION_TIMEOUT_MS = 60_000
#: How long a producer fenced on Kafka looks in the warehouse for the newer coordinator's
#: claim, which follows its init by the time a claim takes (a Delta commit: well under a
#: second, seconds with other starts racing), before it counts as fenced by no coordinator.
CLAIM_WAIT_SECONDS = 10.0
#: The pause between two looks.
CLAIM_POLL_SECONDS = 0.25
#: How long `init_transactions` may take by default: the transaction coordinator found, an
#: earlier holder's open transaction aborted (a broker that just restarted loads its log
#: first).
INIT_TIMEOUT_SECONDS = 30.0
#: How long an abort may take before the producer is dropped (the next init aborts it).
ABORT_TIMEOUT_SECONDS = 10.0


def transactional(settings: dict[str, Any], transactional_id: str) -> dict[str, Any]:
    """Return librdkafka `settings` (coordinator/kafka_clients/producer.durable_config) for a
    transactional producer of `transactional_id`."""
    return {
        **settings,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
    }


class FencedProducer:
    """One of the engine's transactional producers: each call's records in one transaction.

    `fence` is the coordinator's writer epoch, set once claimed (None before, and for a
    producer of no coordinator): what a fenced producer asks (module docstring).
    """

    def __init__(
        self,
        settings: dict[str, Any],
        security: KafkaSecurity,
        *,
        name: str,
        log: logging.Logger,
        connect_timeout_ms: int,
        init_timeout_seconds: float = INIT_TIMEOUT_SECONDS,
    ) -> None:
        self.settings = settings
        self.transactional_id: str = settings["transactional.id"]
        self.security = security
        self.name = name
        self.fence: WriterFence | None = None
        self._log = log
        self._connect_timeout_ms = connect_timeout_ms
        self._init_timeout_seconds = init_timeout_seconds
        self._client: Client | None = None

    def start(self) -> None:
        """Take the transactional id now (fencing its earlier holder), unless this holds it."""
        if self._client is not None:
            return
        if self.fence is not None:
            self.fence.notice()  # never take the id back from a newer coordinator
        client = connect(
            self.settings,
            self.security,
            name=self.name,
            log=self._log,
            timeout_ms=self._connect_timeout_ms,
        )
        try:
            client.producer.init_transactions(self._init_timeout_seconds)
        except KafkaException as exc:
            client.close(timeout=0)
            raise self._init_failure(exc.args[0]) from exc
        self._client = client
        if self.fence is not None:
            try:
                self.fence.notice()  # a claim made while this took the id
            except Exception:
                self.close()
                raise
        self._log.info("%s: transactional id %s taken", self.name, self.transactional_id)

    def send(
        self, topics: Sequence[str], records: Sequence[Record], wait_seconds: float
    ) -> list[Stored | WriteFailure]:
        """Send each record to its topic in one transaction, committed only if every record
        was stored within `wait_seconds`, aborted otherwise; return each record's outcome.

        In an aborted transaction a record the broker had stored fails too (nobody reads
        it). Raises WriterFencedError if a newer coordinator fenced this producer, and
        KafkaUnavailableError if the producer cannot go on (dropped: the next send starts
        a fresh one).
        """
        if not records:
            return []
        self.start()
        client = self._client
        assert client is not None
        try:
            client.producer.begin_transaction()
        except KafkaException as exc:
            self._cannot_go_on(exc.args[0])
        call = hand_over(client, topics, records)
        # A record refused as it was handed over (too large, the local queue full): abort,
        # the owner decides what to send again.
        refused = [o for o in list(call.outcomes) if o is not None and not isinstance(o, Stored)]
        cause = str(refused[0]) if refused else self._commit(client, wait_seconds)
        if call.fatal or client.broken:
            self._cannot_go_on(None)
        if cause is None:
            return call.wait(wait_seconds)  # all acknowledged: the commit flushed them
        self._abort(client)  # fails whatever was still queued or in flight
        aborted = KafkaUnavailableError(f"not published: its transaction was aborted ({cause})")
        outcomes = call.wait(ABORT_TIMEOUT_SECONDS)
        if any(isinstance(outcome, RecordTooLargeError) for outcome in outcomes):
            # After a record the broker refused, librdkafka's next transaction to that
            # partition failed with OUT_OF_ORDER_SEQUENCE_NUMBER ("requires epoch bump"): a
            # fresh producer (a new init: a new epoch, sequences from 0) sends the next one.
            self.close()
        return [aborted if isinstance(outcome, Stored) else outcome for outcome in outcomes]

    def close(self) -> None:
        """Release the producer (a transaction it left open is aborted by the id's next init,
        or by the broker after TRANSACTION_TIMEOUT_MS)."""
        client, self._client = self._client, None
        if client is not None:
            client.close(timeout=0 if client.broken else 5)

    def _commit(self, client: Client, wait_seconds: float) -> str | None:
        """Commit the open transaction within `wait_seconds`; return why not, if not."""
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                # Flushes first: every record is acknowledged, or the commit fails.
                client.producer.commit_transaction(max(0.1, deadline - time.monotonic()))
                return None
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.fatal():
                    self._cannot_go_on(error)
                retry = error.retriable() and not error.txn_requires_abort()
                if not retry or time.monotonic() >= deadline:
                    return error.str()

    def _abort(self, client: Client) -> None:
        """Abort the open transaction; a producer that cannot is dropped (the id's next
        init aborts the transaction)."""
        try:
            client.producer.abort_transaction(ABORT_TIMEOUT_SECONDS)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.fatal():
                self._cannot_go_on(error)
            self._log.warning("%s: abort failed (%s); dropping the producer", self.name, error)
            client.broken = True
            self.close()

    def _cannot_go_on(self, error: KafkaError | None) -> NoReturn:
        """Drop the producer and raise; after a fatal error (most likely: fenced by a newer
        holder of the id) ask the warehouse first (module docstring)."""
        if self._client is not None:
            self._client.broken = True
        self.close()
        why = error.str() if error is not None else "a fatal error (logged above)"
        fence = self.fence
        if fence is not None and (error is None or error.fatal()):
            deadline = time.monotonic() + CLAIM_WAIT_SECONDS
            while True:
                fence.notice()  # WriterFencedError: the newer coordinator's claim
                if time.monotonic() >= deadline:
                    break
                time.sleep(CLAIM_POLL_SECONDS)
            self._log.warning(
                "%s: the producer of %s failed for good (%s), and no newer coordinator "
                "claimed the warehouse within %.0f s: its next send takes the id back",
                self.name,
                self.transactional_id,
                why,
                CLAIM_WAIT_SECONDS,
            )
        raise KafkaUnavailableError(
            f"{self.name}: the Kafka producer of transactional id {self.transactional_id} "
            f"cannot go on: {why}"
        )

    def _init_failure(self, error: KafkaError) -> Exception:
        """Return what a failed `init_transactions` means."""
        if error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            return ConfigurationError(
                f"{self.name}: the broker refuses this principal the transactional id "
                f"{self.transactional_id}: grant it WRITE and DESCRIBE on that TransactionalId "
                "(`txcoord provision` prints the grants; docs/security.md)"
            )
        return KafkaUnavailableError(
            f"{self.name}: could not take the transactional id {self.transactional_id} within "
            f"{self._init_timeout_seconds:.0f} s: {error.str()}"
        )


class FencedSender:
    """What every owner of a FencedProducer (the check publisher, the delivery notices) shows
    the engine: the writer fence its producer asks, its transactional id, and `connect`."""

    _producer: FencedProducer

    @property
    def fence(self) -> WriterFence | None:
        """Return the writer epoch a fenced producer asks."""
        return self._producer.fence

    @fence.setter
    def fence(self, fence: WriterFence | None) -> None:
        self._producer.fence = fence

    @property
    def transactional_id(self) -> str:
        """Return the transactional id of this warehouse's producers of this kind."""
        return self._producer.transactional_id

    def connect(self) -> None:
        """Take the transactional id now (fencing an older coordinator's producer), so that a
        batch's first records do not wait for it either."""
        self._producer.start()
