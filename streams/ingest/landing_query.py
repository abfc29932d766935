"""Landing: the ingress records of a micro-batch -> three Delta tables, exactly once.

The decision query (streams/query/decision_query.py) lands each batch's records beside that
batch's decisions, side by side (`IngestBatchWriter.land_rows`; the batch ends only when
both are written, and what a crash between them leaves is for streams/state/landing_repair.py),
appending:

    valid halves + the half topic's newest heartbeat  -> system/half_messages   (one file)
    valid ops    + the op topic's newest heartbeat    -> system/op_records      (one file)
    everything else, with the reason                  -> system/quarantine

Each append is idempotent (streams/writes/delta_writes.py: marked with the query's app id and the
batch id), so a batch replayed after a crash writes nothing twice; the three run side by
side (streams/writes/parallel_writes.py). A batch of heartbeats alone lands nothing. Each commit
also records which ingress records the writer had landed before the batch and after it
(streams/ingest/landing_coverage.py): a crash between the three commits, and then a lost
checkpoint, leaves the warehouse saying what may be missing (streams/state/landing_repair.py).

`start_ingest` runs the same landing as a query of its own (`available_now` drains what
Kafka holds and stops): a backfill of the tables without deciding anything, and the way the
tests exercise landing alone.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Row, SparkSession

from coordinator.core.config import Config
from coordinator.core.failpoints import failpoint
from delta_tables import half_messages, op_records, quarantine
from delta_tables.table import TableSpec
from streams.ingest.landing_coverage import (
    LANDING_TABLES,
    Coverage,
    CoverageKeeper,
    Offsets,
    landed_ends,
    merged,
)
from streams.ingest.transforms import (
    KIND_HALF,
    KIND_OP,
    IngestRules,
    half_rows,
    op_rows,
    parse,
    quarantine_rows,
)
from streams.progress.step_timer import StepTimer
from streams.progress.tally import Tally
from streams.writes.arrow_rows import TIMESTAMP, constant, summary
from streams.writes.batch_gate import BatchGate
from streams.writes.delta_writes import BatchLedger, checkpoint_app_id
from streams.writes.parallel_writes import Step, run_steps
from streams.writes.writer_fence import WriterFence

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

QUERY_NAME = "txcoord-ingest"
#: The ingest consumers' fetch.max.wait.ms (see `ingress_records`).
FETCH_MAX_WAIT_MS = 0


def rules_of(config: Config) -> IngestRules:
    """Return the validation rules the configuration implies."""
    return IngestRules(
        layout=config.kafka.layout,
        max_message_size=config.max_message_size,
        default_queue_count=config.default_queue_count,
        max_check_immunity_seconds=int(config.max_check_immunity.total_seconds()),
        allowed_topics=config.allowed_topics,
        engine_principal=config.kafka.principal,
    )


class IngestBatchWriter:
    """The foreachBatch function of the ingest query."""

    def __init__(
        self,
        config: Config,
        app_id: str,
        tally: Tally | None = None,
        gate: BatchGate | None = None,
        *,
        fence: WriterFence | None = None,
        landed_from: Offsets | None = None,
    ) -> None:
        self.config = config
        self.tally = tally or Tally()
        self.rules = rules_of(config)
        self.ledger = BatchLedger(app_id, fence)
        self.warehouse = config.warehouse
        self.gate = gate or BatchGate()
        # Which ingress records are landed, recorded in every landing commit
        # (streams/ingest/landing_coverage.py); `landed_from`: where the first batch begins, when
        # the writer is told (a rebuild's repair, streams/state/landing_repair.py).
        self.coverage = CoverageKeeper(app_id, landed_from)

    def __call__(self, records: DataFrame, batch_id: int) -> None:
        """Land one micro-batch of ingress records, unless the query is stopping."""
        with self.gate.batch(records.sparkSession, batch_id):
            self.land(records, batch_id)

    def land(self, records: DataFrame, batch_id: int) -> None:
        """Land one micro-batch of ingress records (the Kafka source's columns)."""
        parsed = parse(records, self.rules)
        self.land_rows(parsed.sparkSession, parsed.toArrow(), batch_id)

    def batch_coverage(self, spark: SparkSession, batch_id: int, parsed: pa.Table) -> Coverage:
        """Return the coverage of batch `batch_id`, whose ingress records are `parsed`
        (streams/ingest/landing_coverage.py)."""
        for spec in LANDING_TABLES:  # a writer not `prepare`d: at its first batch
            if spec.name not in self.coverage.marks:
                self._prime(spark, spec)
        return self.coverage.of_batch(batch_id, parsed, functools.partial(self._landed, spark))

    def land_rows(
        self,
        spark: SparkSession,
        parsed: pa.Table,
        batch_id: int,
        by_topic: Census | None = None,
        coverage: Coverage | None = None,
    ) -> None:
        """Land one micro-batch of ingress records, `parse`d, as Arrow
        (streams/writes/arrow_rows.py).

        `by_topic` is the batch's `census`, and `coverage` its `batch_coverage`, when the
        caller has them already.
        """
        timer = StepTimer()
        landed_at = datetime.now(UTC)
        classified = parsed.append_column(
            "ingested_at", constant(landed_at, TIMESTAMP, parsed.num_rows)
        )
        if by_topic is None:
            by_topic = census(parsed)
        counts: Counter[tuple[str, bool, bool]] = Counter()
        for (source, bad, tick, _), n in by_topic.items():
            counts[source, bad, tick] += n
        if coverage is None:
            coverage = self.batch_coverage(spark, batch_id, parsed)
        metadata = coverage.metadata()
        # Each table its own commit, side by side (streams/writes/parallel_writes.py), each with the
        # batch's coverage: a crash between them leaves it said which records may be missing.
        # Heartbeats alone are not landed: the coordinator takes its event time from Kafka,
        # and an idle stack then makes no Delta commit at all.
        writes = {
            half_messages.TABLE.name: (counts.get((KIND_HALF, False, False)), self._land_halves),
            op_records.TABLE.name: (counts.get((KIND_OP, False, False)), self._land_ops),
            quarantine.TABLE.name: (any(bad for _, bad, _ in counts), self._quarantine),
        }
        steps: list[Step] = [
            (name, functools.partial(write, spark, classified, batch_id, metadata))
            for name, (wanted, write) in writes.items()
            if wanted
        ]
        if steps:
            run_steps(spark, steps, timer)
        self.coverage.landed(coverage)
        failpoint("ingest.after_batch")
        self.tally.add(
            halves=counts.get((KIND_HALF, False, False), 0),
            ops=counts.get((KIND_OP, False, False), 0),
            quarantined=sum(n for (_, bad, _), n in counts.items() if bad),
        )
        self.tally.add_by_topic(
            halves={
                real: n
                for (source, bad, tick, real), n in by_topic.items()
                if source == KIND_HALF and not bad and not tick and real
            }
        )
        log.info("ingest batch %d: %s", batch_id, timer.summary())

    def prepare_steps(self, spark: SparkSession) -> list[Step]:
        """Return the steps that read each landing table's newest mark ahead of the first
        batch: its last batch, and what its coverage says."""
        return [(spec.name, functools.partial(self._prime, spark, spec)) for spec in LANDING_TABLES]

    def _prime(self, spark: SparkSession, table: TableSpec) -> None:
        self.coverage.know(table.name, self.ledger.learn_mark(spark, table.path(self.warehouse)))

    def _landed(self, spark: SparkSession) -> Offsets:
        """Return what the tables' rows say is landed (no coverage to go by)."""
        names = [spec.name for spec in LANDING_TABLES]
        return merged(*landed_ends(spark, self.config, names).values())

    def _append(
        self,
        spark: SparkSession,
        rows: pa.Table,
        table: TableSpec,
        batch_id: int,
        metadata: Mapping[str, Any],
    ) -> None:
        self.ledger.append(rows, table.path(self.warehouse), batch_id, spark, metadata=metadata)

    def _land_halves(
        self, spark: SparkSession, classified: pa.Table, batch_id: int, metadata: Mapping[str, Any]
    ) -> None:
        self._append(spark, half_rows(classified), half_messages.TABLE, batch_id, metadata)
        failpoint("ingest.after_half_messages")

    def _land_ops(
        self, spark: SparkSession, classified: pa.Table, batch_id: int, metadata: Mapping[str, Any]
    ) -> None:
        self._append(spark, op_rows(classified), op_records.TABLE, batch_id, metadata)
        failpoint("ingest.after_op_records")

    def _quarantine(
        self, spark: SparkSession, classified: pa.Table, batch_id: int, metadata: Mapping[str, Any]
    ) -> None:
        self._append(spark, quarantine_rows(classified), quarantine.TABLE, batch_id, metadata)
        failpoint("ingest.after_quarantine")


#: Records of one batch per (ingress kind: half or op, invalid, heartbeat, real topic).
Census = dict[tuple[str, bool, bool, str | None], int]


def census_keys(records: pa.Table, prefix: str = "") -> dict[str, pa.ChunkedArray]:
    """Return the grouping keys of `census` over `parse`d records named `prefix` + name."""
    return {
        prefix + "ingress_kind": records[prefix + "ingress_kind"],
        prefix + "bad": pc.is_valid(records[prefix + "reason"]),
        prefix + "is_tick": records[prefix + "is_tick"],
        prefix + "topic": records[prefix + "topic"],
    }


def census_of(rows: list[Row], prefix: str = "") -> Census:
    """Return the `census` of rows grouped by `census_keys(prefix)` with a "count"."""
    found: Census = {}
    for row in rows:
        key = (
            row[prefix + "ingress_kind"],
            row[prefix + "bad"],
            row[prefix + "is_tick"],
            row[prefix + "topic"],
        )
        found[key] = found.get(key, 0) + row["count"]
    return found


def census(parsed: pa.Table) -> Census:
    """Count a batch's parsed records: which tables it touches, and the tally's figures.

    A table with nothing to add gets no commit at all. The real topic too: pending halves
    per topic are a metric (rocketmq_half_messages).
    """
    return census_of(summary(parsed, census_keys(parsed), {}, {}))


def ingress_records(
    spark: SparkSession, config: Config, starting_offsets: str = "earliest"
) -> DataFrame:
    """Return the streaming Kafka source over the ingress topics.

    In the per-group layout (coordinator/core/topics.py) it subscribes by pattern: a group's topics,
    created later, are read from their start by the batch after they appear. A new
    checkpoint reads from `starting_offsets` (Spark's JSON of every partition's offset, or
    "earliest"); an existing one from where it stopped.
    """
    layout = config.kafka.layout
    subscription = (
        ("subscribePattern", layout.ingress_pattern())
        if layout.per_group
        else ("subscribe", f"{layout.half},{layout.op}")
    )
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.kafka.bootstrap_servers)
        .options(**config.kafka.security.spark_options())
        .option(*subscription)
        .option("startingOffsets", starting_offsets)
        .option("includeHeaders", "true")
        # Spark's reader asks for each partition's offset range after every poll (two
        # ListOffsets requests). By then the consumer has pipelined its next fetch, which
        # the broker holds at the log's end for fetch.max.wait.ms (500 ms by default), and
        # a broker answers one connection in order: each partition of each batch waited for
        # that fetch for nothing, most of an idle batch, and still a good part of a steady
        # batch's read at 10 ms (docs/performance.md, decisions). At 0 the broker answers at
        # once, and Spark's consumer fetches only inside a task.
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        .load()
    )


def checkpoint_of(config: Config) -> str:
    """Return the ingest query's checkpoint location."""
    return f"{config.streams.checkpoint_dir.rstrip('/')}/ingest"


def start_ingest(
    spark: SparkSession,
    config: Config,
    available_now: bool = False,
    tally: Tally | None = None,
    gate: BatchGate | None = None,
) -> StreamingQuery:
    """Start the ingest query (the tables must exist); `available_now` drains and stops.

    `gate` lets an orderly stop wait for the batch in flight (streams/writes/batch_gate.py).
    """
    checkpoint = checkpoint_of(config)
    app_id = checkpoint_app_id(spark, checkpoint, "ingest")
    writer = IngestBatchWriter(config, app_id, tally, gate)
    stream = (
        ingress_records(spark, config)
        .writeStream.queryName(QUERY_NAME)
        .foreachBatch(writer)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        stream = stream.trigger(availableNow=True)
    else:
        seconds = config.streams.trigger_interval.total_seconds()
        stream = stream.trigger(processingTime=f"{seconds} seconds")
    return stream.start()
