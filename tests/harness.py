"""What the end-to-end tests share: a Kafka-ingress producer, a check responder, the engine.

Producers and responders speak the documented Kafka ingress format (coordinator/protocol/ingress.py)
through a real broker; `Engine` runs the real decision query in this test process's Spark
session, stoppable and startable again.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from types import SimpleNamespace
from typing import Any, NamedTuple

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from pyspark.sql import DataFrame, SparkSession

from coordinator.core.config import Config
from coordinator.kafka_clients.admin import admin_client, delete_topic
from coordinator.kafka_clients.options import COMMITTED_ONLY, kafka_python_options
from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_claim import is_claim
from coordinator.protocol.check_record import CheckRecord
from coordinator.protocol.deliveries import delta_rs_location
from coordinator.runtime import engine
from coordinator.sdk.consumer.membership import kafka_group_id
from streams.kafka_io.delivery_notices import ensure_consumer_topics
from streams.query.decision_query import QUERY_NAME

GROUP = "orders"
TOPIC = "OrderPaid"

#: The contract's "a few seconds" (docs/contract.md, guarantee 4) as a test may assert it: a
#: check within 2 x transaction_timeout + this of its half being stored, each later one within
#: transaction_check_interval + transaction_timeout + this of the previous. Loose on purpose:
#: it must hold on a 2-core machine shared with another test worker and a CPU hog, where a
#: batch takes seconds. A stalled event time never checks at all and one moved by producer
#: traffic alone waits for traffic: both still fail it. How soon checks really go out is a
#: performance figure, `txcoord bench`'s (check timeliness), never a test's.
FEW_SECONDS = 20


class Producer:
    """Sends half messages and op records in the Kafka ingress format (acks=all)."""

    def __init__(self, config: Config, **options: Any) -> None:
        self.config = config
        self.kafka = KafkaProducer(
            bootstrap_servers=config.kafka.bootstrap_servers,
            acks="all",
            **{**kafka_python_options(), **options},
        )

    def half(
        self,
        tx: str,
        *,
        group: str = GROUP,
        topic: str = TOPIC,
        queue_id: int | None = None,
        immunity: str | None = None,
        body: bytes | None = None,
        properties: dict[str, str] | None = None,
        tags: str | None = None,
    ) -> Any:
        """Send one half message; return the send's future."""
        headers = [
            (fmt.PRODUCER_GROUP, group.encode()),
            (fmt.TOPIC, topic.encode()),
            (fmt.KEYS, json.dumps([tx]).encode()),
        ]
        if queue_id is not None:
            headers.append((fmt.QUEUE_ID, str(queue_id).encode()))
        if immunity is not None:
            headers.append((fmt.CHECK_IMMUNITY_SECONDS, immunity.encode()))
        if tags is not None:
            headers.append((fmt.TAGS, tags.encode()))
        for name, text in (properties or {}).items():
            headers.append((f"{fmt.PROPERTY_PREFIX}{name}", text.encode()))
        value = body if body is not None else f"body-{tx}".encode()
        return self.kafka.send(
            self.config.kafka.half_topic, key=tx.encode(), value=value, headers=headers
        )

    def op(self, tx: str, op: str, *, group: str = GROUP, from_check: bool = False) -> Any:
        """Send one op record; return the send's future."""
        headers = [
            (fmt.PRODUCER_GROUP, group.encode()),
            (fmt.OP, op.encode()),
            (fmt.FROM_CHECK, b"true" if from_check else b"false"),
        ]
        return self.kafka.send(self.config.kafka.op_topic, key=tx.encode(), headers=headers)

    def flush(self) -> None:
        """Wait until everything sent is acknowledged."""
        self.kafka.flush(timeout=60)

    def close(self) -> None:
        """Flush and close."""
        self.kafka.close(timeout=10)


class Reply(NamedTuple):
    """An answer sent `after` seconds past the check's `requested_at`, not at once.

    Timed from the check's own `requested_at_ms` (the coordinator's clock, the same host's),
    not from when the responder read it: how late the check record reached the responder
    then does not move the answer, so a test knows when its answer is stored.
    """

    op: str
    after: float


Answer = Callable[[dict[str, Any]], str | Reply | None]


class Responder:
    """A producer group's check listener: answers each check request with `answer(request)`.

    A plain op is sent at once; a `Reply` is sent on a timer of its own, so that one slow
    answer never holds up the next check's.
    """

    def __init__(self, config: Config, answer: Answer, group: str = GROUP) -> None:
        self.config, self.answer, self.group = config, answer, group
        self.requests: list[dict[str, Any]] = []
        #: (transaction id, check number) -> when that check first reached the check topic:
        #: its record's timestamp, epoch ms (a replayed batch may publish a check again).
        self.published_ms: dict[tuple[str, int], int] = {}
        self.sent: list[tuple[str, str]] = []  # (transaction id, op), once acknowledged
        self.errors: list[str] = []  # what went wrong reading checks or sending answers
        self._producer = Producer(config)
        self._stop = threading.Event()
        self._timers: list[threading.Timer] = []
        self._thread = threading.Thread(target=self._run, name="responder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Built like the SDK's listener (kafka_python_options: after a broker restart,
        # kafka-python's default reconnect backoff kept it away up to 30 s, and the checks
        # published meanwhile went unanswered until their transactions were discarded).
        # Partitions assigned, not a consumer group: each responder reads the check topic
        # from the start, like a new group.
        topic = self.config.kafka.check_topic
        consumer = KafkaConsumer(
            bootstrap_servers=self.config.kafka.bootstrap_servers,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=500,
            **COMMITTED_ONLY,  # as the SDK's listener reads the checks
            **kafka_python_options(),
        )
        partitions = None
        # A topic being created (the engine makes a group's own check topic at its first
        # check) may show no partitions at first: wait for them, or nothing is ever read.
        while not partitions and not self._stop.is_set():
            consumer.topics()  # refreshes the metadata
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                time.sleep(0.2)
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions or ())])
        consumer.seek_to_beginning()
        try:
            while not self._stop.is_set():
                # A listener that dies answers nothing more, and every later transaction
                # that waits for its check is discarded: an error is recorded, never fatal.
                try:
                    for record in consumer:
                        self._handle(record)
                except Exception as exc:  # recorded, then read on
                    self.errors.append(f"{time.strftime('%H:%M:%S')} read: {exc!r}")
                    time.sleep(0.5)
        finally:
            consumer.close()

    def _handle(self, record: Any) -> None:
        if is_claim(record.headers):
            return  # an SDK instance answered a check addressed to it: not a check
        request = CheckRecord.decode(record.value).to_value()  # the one codec
        if request.get("producer_group") != self.group:
            return  # another group's check: its own producers answer it
        self.requests.append(request)
        check = (request["transaction_id"], request["check_number"])
        self.published_ms.setdefault(check, record.timestamp)
        reply = self.answer(request)
        if isinstance(reply, Reply):
            at = request.get("requested_at_ms", time.time() * 1000) / 1000
            self._later(at + reply.after - time.time(), request, reply.op)
        elif reply is not None:
            self._send(request, reply)

    def _later(self, delay: float, request: dict[str, Any], op: str) -> None:
        timer = threading.Timer(max(delay, 0.0), self._send, (request, op))
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def _send(self, request: dict[str, Any], op: str) -> None:
        tx = request["transaction_id"]
        while not self._stop.is_set():  # until acknowledged: the broker may be restarting
            try:
                self._producer.op(tx, op, group=self.group, from_check=True).get(timeout=60)
            except Exception as exc:  # recorded, then sent again
                self.errors.append(f"{time.strftime('%H:%M:%S')} answer {tx}: {exc!r}")
                time.sleep(0.5)
                continue
            self.sent.append((tx, op))
            return

    def stop(self) -> None:
        """Stop answering (answers still on their timers are not sent)."""
        self._stop.set()
        for timer in self._timers:
            timer.cancel()
        self._thread.join(15)
        self._producer.close()


class Engine(engine.Engine):
    """The engine, started at once; `stop` fails the test if a query had failed."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        super().__init__(spark, config)
        self.failures: list[Any] = []
        self.start()

    def _judge(self, query: Any) -> None:
        # A stream that failed while the test ran is a failure; an interruption caused by
        # stopping it mid-batch is not (the batch is replayed on the next start).
        if query is not None and not query.isActive and query.exception() is not None:
            self.failures.append(query.exception())

    def stop_coordinator(self, hurry: threading.Event | None = None) -> None:
        """Stop the decision query; a failure before the stop is kept for `stop`."""
        self._judge(self.coordinator)
        super().stop_coordinator(hurry)

    def stop(self, hurry: threading.Event | None = None) -> None:
        """Stop everything; fail if a query had failed."""
        self._judge(self.coordinator)
        super().stop(hurry)
        assert self.failures == [], self.failures


def table(spark: SparkSession, config: Config, name: str) -> DataFrame:
    """Return warehouse table `name` ("system/transactions", "topics/T") read by Spark."""
    return spark.read.format("delta").load(f"{config.warehouse}/{name}")


def rows(config: Config, name: str) -> list[Any]:
    """Return every row of warehouse table `name`, read by delta-rs (attributes by column,
    as Spark's rows have them).

    The checks of the crash tests read the system tables this way: on local disk the checks
    of a run went from 9-23 s with a Spark query per table to 4-11 s (on the S3 API, ~10 s
    either way); the waits of the others poll this way (see `count`). Spark still reads
    the topics and the queue offsets in those checks, so both readers are held to the
    tables."""
    found = DeltaTable(delta_rs_location(f"{config.warehouse}/{name}")).to_pyarrow_table()
    return [SimpleNamespace(**row) for row in found.to_pylist()]


def count(config: Config, name: str) -> int:
    """Return how many rows warehouse table `name` holds, read by delta-rs (0: not created
    yet): what a wait polls each second.

    A Spark count costs the worker's session JVM 0.2-0.5 CPU-seconds a look, on the CPU the
    engine under test needs (delta-rs: 0.07, in this process); the checks after a wait still
    read with Spark (`table`), so both readers are held to the tables."""
    try:
        found = DeltaTable(delta_rs_location(f"{config.warehouse}/{name}"))
    except TableNotFoundError:
        return 0
    return int(found.to_pyarrow_dataset().count_rows())


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` each second until true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def warm(engine: Engine, batches: int = 3) -> None:
    """Wait until the query has run a few batches (startup is not what is measured)."""
    wait_for(
        lambda: engine.progress.batches[QUERY_NAME] >= batches,
        240,
        "the query to start",
    )


def watermark_past(line: dict[str, Any] | None, moment: float) -> bool:
    """Return whether progress summary `line` (streams/progress/batch_log.py) has a watermark past
    `moment`.

    `moment` is epoch seconds in store time (the broker's LogAppendTime: this host's clock).
    """
    mark = (line or {}).get("watermark")
    return bool(mark) and datetime.fromisoformat(str(mark)).timestamp() > moment


def last_progress(lines: Iterable[str]) -> dict[str, Any] | None:
    """Return the newest coordinator progress summary among an application's log `lines`."""
    last = None
    for line in lines:
        if "txcoord.progress: " in line:
            summary = json.loads(line.split("txcoord.progress: ", 1)[1])
            if summary.get("query") == QUERY_NAME:
                last = summary
    return last


def wait_past(engine: Engine, moment: float, timeout: float, what: str) -> None:
    """Wait until a coordinator batch has run with its event-time watermark past `moment`.

    The positive marker of every "nothing more happened" check. The stage's timers (checks,
    discards, expiries, orphans) fire in the batch whose watermark passes them, and a batch's
    progress is reported once its writes are done: when this returns, everything the engine
    would emit for store times up to `moment` is in the tables. Pass the time a wrongly late
    emission would be due (e.g. now + the check interval), then assert.
    """
    wait_for(
        lambda: watermark_past(engine.progress.last.get(QUERY_NAME), moment),
        timeout,
        f"the coordinator's watermark to pass {what}",
    )


def as_group(config: Config, group: str = GROUP) -> Config:
    """Return `config` as `group`'s producers and check listener see it: the half, op and
    check topics they write and read. In the per-group layout those are the group's own (the
    Producer and Responder here use the configured topics as they are); in the shared
    layout, `config` itself."""
    layout = config.kafka.layout
    if not layout.per_group:
        return config
    own = replace(
        config.kafka,
        half_topic=layout.half_topic(group),
        op_topic=layout.op_topic(group),
        check_topic=layout.check_topic(group),
        topics_per_group=False,  # these names are final: no group suffix on top
    )
    return replace(config, kafka=own)


def kafka_members(config: Config, group: str) -> set[str]:
    """Return the client ids of `group`'s members as Kafka's group coordinator knows them,
    once the group is stable (empty while it rebalances)."""
    with admin_client(config.kafka.bootstrap_servers) as admin:
        info = admin.describe_groups([kafka_group_id(group)]).get(kafka_group_id(group)) or {}
    if str(info.get("group_state", info.get("state", ""))).lower() != "stable":
        return set()
    return {str(m.get("client_id")) for m in info.get("members") or []}


@contextmanager
def consumer_topics_of(config: Config) -> Iterator[Config]:
    """Make `config`'s deliveries and offsets topics, as the engine makes them at its start
    (for tests of consumers that run no engine); drop them at the end of the block."""
    ensure_consumer_topics(config)
    try:
        yield config
    finally:
        for topic in (config.kafka.deliveries_topic, config.kafka.consumer_offsets_topic):
            delete_topic(config.kafka.bootstrap_servers, topic)
