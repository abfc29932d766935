"""The engine: heartbeat ticker and the decision query in one Spark session.

`coordinator/app.py` (spark-submit) and `txcoord up` both run it. Start order: ingress
topics and system tables (created when absent), the progress listener, the ticker, the
decision query (which reads the ingress topics, lands every record and decides, one
micro-batch at a time: streams/query/decision_query.py), the compactor of the output tables
(streams/writes/compactor.py). The engine says it is running once the query's first batch is done:
that batch pays the process's one-time costs (code generated and compiled, Kafka consumers
and state stores opened: seconds), and a record sent after "running" should not wait behind
them. Stop order: compactor, ticker, then the query. Each micro-batch
is idempotent, so a stop — or a kill -9 — at any point is safe: the next start replays
from the checkpoint.

An orderly stop is also quiet: the query's batch gate closes first (streams/writes/batch_gate.py),
and the query is stopped only once it is between triggers or its next batch waits at the gate,
never while a batch writes. Interrupting a batch's writes logs Spark and py4j errors (and a
StackOverflowError out of Spark's stop detection) for what is in fact an ordinary stop. A
batch that does not finish within `BATCH_FINISH_WAIT` (or a caller in a hurry) is stopped
anyway: it is replayed by the next start, as after a crash.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka.admin import ConfigResource, ConfigResourceType

from coordinator.core import failpoints
from coordinator.core.config import Config, group_isolation_problem
from coordinator.core.errors import WriterFencedError
from coordinator.kafka_clients.admin import admin_client
from coordinator.runtime.driver_metrics import MetricsServer, serve_metrics
from coordinator.runtime.table_counts import table_counts
from delta_tables.log_retention import keep_logs_for
from delta_tables.registry import create_system_tables
from streams.kafka_io.delivery_notices import ensure_consumer_topics
from streams.kafka_io.ingress_topics import ensure_ingress_topics, subscribed_topics
from streams.kafka_io.outage import last_commit_ms, outage_warning, topic_retention_ms
from streams.kafka_io.ticker import Ticker
from streams.progress.batch_log import ProgressLog
from streams.progress.listener import listen
from streams.progress.step_timer import StepTimer
from streams.progress.tally import Tally
from streams.query.batch_writer import CoordinatorBatchWriter
from streams.query.decision_query import QUERY_NAME, checkpoint_of, start_coordinator, tick_pace
from streams.state.landing_repair import batches_recorded
from streams.state.rebuild import holds_no_state, rebuild
from streams.writes.batch_gate import BatchGate
from streams.writes.compactor import Compactor

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

#: How long a stop waits for the micro-batch in flight before cutting it short (replayed later).
BATCH_FINISH_WAIT = 120.0
#: How long a start waits for the query's first batch (a backlog may make it long: the
#: engine then says it is running while that batch goes on).
FIRST_BATCH_WAIT = 60.0
#: How often a stop looks whether a query has reached a point where stopping it is quiet.
STOP_POLL_SECONDS = 0.05


class Engine:
    """Start, watch and stop the streams of one coordinator."""

    def __init__(self, spark: SparkSession, config: Config) -> None:
        self.spark, self.config = spark, config
        self.progress = ProgressLog()
        self.tally = Tally()
        self.ticker: Ticker | None = None
        # Heartbeats every tick while a timer may come due, rarely otherwise.
        self.pace = tick_pace(config)
        self.coordinator: StreamingQuery | None = None
        self.writer: CoordinatorBatchWriter | None = None
        self.compactor: Compactor | None = None
        self.metrics: MetricsServer | None = None
        self._unlisten: Callable[[], None] | None = None

    def start(self) -> Engine:
        """Create what is missing and start the ticker and the decision query."""
        timer = StepTimer()
        if isolation := group_isolation_problem(self.config.kafka):  # accepted, or refused
            log.warning("%s (kafka.accept_no_group_isolation = true)", isolation)
        with timer.step("topics"):
            ensure_ingress_topics(self.config)
            ensure_consumer_topics(self.config)
            self._warn_of_outage()
        retention = self.config.streams.log_retention
        with timer.step("tables"):
            create_system_tables(self.spark, self.config.warehouse, retention)
            keep_logs_for(self.spark, self.config.warehouse, retention)
        with timer.step("counts"):
            counts = table_counts(self.spark, self.config)
        with timer.step("state"):
            if self._derive_lost_state(counts.halves + counts.ops + counts.quarantined > 0):
                counts = table_counts(self.spark, self.config)
        self.tally.seed(counts)
        self._unlisten = listen(self.spark, self.progress)
        if self.config.metrics.port >= 0:
            metrics = self.config.metrics
            self.metrics = serve_metrics(self.tally, self.progress, metrics.host, metrics.port)
        kafka = self.config.kafka
        self.ticker = Ticker(
            kafka.bootstrap_servers,
            [kafka.half_topic, kafka.op_topic],
            self.config.streams.tick_interval,
            kafka.security,
            pace=self.pace,
        ).start()
        with timer.step("query"):
            self.start_coordinator()
        with timer.step("first batch"):
            self._await_first_batch()
        self.compactor = Compactor(
            self.spark,
            self.config.warehouse,
            self.config.streams.compact_interval,
            fence=self.writer.fence if self.writer is not None else None,
        ).start()
        log.info(
            "engine running: decision query %s; started in %s",
            self.coordinator and self.coordinator.id,
            timer.summary(),
        )
        return self

    def _derive_lost_state(self, landed: bool) -> bool:
        """Derive the state from the warehouse if the checkpoint holds none and the warehouse
        holds an earlier coordinator's work; return True if it did. That work is landed
        records (`landed`: the tables hold some), or else any commit of a coordinator batch
        (one that crashed before its landing committed may have written decisions).

        The checkpoint is a cache of the warehouse (contract 7.11). Started without one (the
        folder lost or removed, a new `checkpoint_dir`), the query would read Kafka from its
        start and decide every record again: every committed message was delivered twice,
        under new offsets. So the start does what `txcoord state rebuild --from warehouse`
        does, once: the next start finds the checkpoint it made.
        """
        if not holds_no_state(self.spark, self.config):
            return False  # a state to resume, or a rebuild the query refuses to start beside
        if not landed and not batches_recorded(self.spark, self.config):
            return False  # a new warehouse: nothing to derive
        log.warning(
            "the coordinator checkpoint %s holds no state, and the warehouse %s holds an "
            "earlier coordinator's work: deriving the state from the warehouse (as `txcoord "
            "state rebuild --from warehouse` does), not reading Kafka again from its start",
            self.config.streams.checkpoint_dir,
            self.config.warehouse,
        )
        rebuilt = rebuild(
            self.spark, self.config, self.config.spark.shuffle_partitions, "warehouse"
        )
        log.info(
            "state derived from the warehouse: %d transactions, into %s (%.1f s)",
            rebuilt.transactions,
            rebuilt.generation,
            rebuilt.seconds,
        )
        return True

    def _warn_of_outage(self) -> None:
        """Warn if the engine was stopped longer than an ingress topic keeps records."""
        kafka = self.config.kafka
        with admin_client(kafka.bootstrap_servers, security=kafka.security) as admin:
            topics = subscribed_topics(self.config, admin)
            described = admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic) for topic in topics]
            )
        last = last_commit_ms(self.spark, checkpoint_of(self.config, self.spark))
        if warning := outage_warning(last, topic_retention_ms(described, topics)):
            log.warning("%s", warning)

    def _await_first_batch(self) -> None:
        """Wait until the decision query has run a batch, stopped, or FIRST_BATCH_WAIT passed.

        A batch frozen at a failpoint (coordinator/core/failpoints.py) never ends: no wait then.
        """
        query = self.coordinator
        deadline = time.monotonic() + FIRST_BATCH_WAIT
        while query is not None and query.isActive and time.monotonic() < deadline:
            if self.progress.batches[QUERY_NAME] >= 1 or failpoints.frozen():
                return
            time.sleep(STOP_POLL_SECONDS)
        if query is not None and query.isActive:
            log.warning(
                "the coordinator's first batch has run %.0f s (a backlog?); running meanwhile",
                FIRST_BATCH_WAIT,
            )

    def start_coordinator(self) -> None:
        """Start the decision query from its checkpoint."""
        self.pace.saw_activity()  # its state may hold timers due any moment
        self.coordinator, self.writer = start_coordinator(
            self.spark, self.config, self.tally, BatchGate(), self.pace
        )

    def stop_coordinator(self, hurry: threading.Event | None = None) -> None:
        """Stop the decision query (producers' records wait in Kafka)."""
        if self.coordinator is not None:
            gate = self.writer.gate if self.writer is not None else None
            stop_quietly(self.coordinator, gate, hurry)
        if self.writer is not None:
            self.writer.close()

    @property
    def metrics_url(self) -> str | None:
        """Return the driver's /metrics address, when it serves one."""
        if self.metrics is None:
            return None
        return f"http://{self.config.metrics.host}:{self.metrics.port}/metrics"

    def fenced(self) -> WriterFencedError | None:
        """Return the error that stopped the coordinator because a newer one took over.

        Our own fence (the writer's WriterFencedError) says so; so does Spark's checkpoint log
        refusing a batch the newer coordinator already planned or committed
        (CONCURRENT_STREAM_LOG_UPDATE). A query stopped by anything else while a newer claim
        exists (a coordinator frozen for minutes wakes to a stale S3 connection) is not
        fenced, but superseded: it must not come back either (a restart would fence the newer
        one), so it is reported the same way, and its message says what stopped it first.
        Before, that message read as a fence, and a test of the fence could not tell.
        """
        writer = self.writer
        if writer is None or writer.fenced is not None or writer.fence is None:
            return writer.fenced if writer is not None else None
        query = self.coordinator
        if query is not None and not query.isActive:
            try:
                writer.fence.notice()
            except WriterFencedError as exc:
                error = query.exception()
                writer.fenced = exc
                if not _taken_over(error):
                    writer.fenced = WriterFencedError(
                        f"{exc} It had stopped for another reason first, not by the fence "
                        f"(superseded): {str(error)[:300]}"
                    )
        return writer.fenced

    def problems(self) -> list[str]:
        """Return what is wrong right now: a query that stopped, with its error."""
        if (fenced := self.fenced()) is not None:
            return [str(fenced)]  # the whole story; Spark's wrapping adds only a traceback
        return [
            f"query {query.name} stopped: {query.exception()}"
            for query in (self.coordinator,)
            if query is not None and not query.isActive
        ]

    def stop(self, hurry: threading.Event | None = None) -> None:
        """Stop the compactor, the ticker, then the decision query; safe to call more than once.

        The batch in flight finishes first (up to `BATCH_FINISH_WAIT`, or until `hurry` is
        set); see the module docstring.
        """
        compactor, self.compactor = self.compactor, None
        if compactor is not None:
            compactor.stop()
        if self.ticker is not None:
            self.ticker.stop()
        self.stop_coordinator(hurry)
        unlisten, self._unlisten = self._unlisten, None
        if unlisten is not None:
            unlisten()
        metrics, self.metrics = self.metrics, None
        if metrics is not None:
            metrics.stop()
        log.info("engine stopped")


def stop_quietly(
    query: StreamingQuery, gate: BatchGate | None, hurry: threading.Event | None = None
) -> None:
    """Stop `query` once no batch of it is writing: between triggers, or parked at `gate`.

    Closes `gate` (no new batch starts its work), waits up to `BATCH_FINISH_WAIT` for the
    batch in flight, then stops the query. A batch still writing then (or when `hurry` is
    set) is interrupted; it is replayed by the next start.
    """
    if gate is not None:
        gate.close()
    deadline = time.monotonic() + BATCH_FINISH_WAIT
    announced = False
    while query.isActive and (gate is None or not gate.parked):
        if not query.status["isTriggerActive"]:
            break
        if (hurry is not None and hurry.is_set()) or time.monotonic() > deadline:
            log.warning(
                "stopping %s in the middle of a batch; the next start replays it", query.name
            )
            break
        if not announced:
            log.info("%s: letting the batch in flight finish", query.name)
            announced = True
        time.sleep(STOP_POLL_SECONDS)
    query.stop()


#: What Spark's checkpoint log says when another query on the same checkpoint wrote the batch
#: this one planned (a newer coordinator on this checkpoint), and what our fence says.
TAKEN_OVER = re.compile(r"CONCURRENT_STREAM_LOG_UPDATE|Multiple streaming jobs|is fenced")


def _taken_over(error: object) -> bool:
    """Return whether a query's `error` says another coordinator took its place."""
    return error is not None and TAKEN_OVER.search(str(error)) is not None
