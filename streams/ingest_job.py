"""The ingest stream's edges: Kafka ingress topics in, four Delta tables out, exactly once.

One query reads both ingress topics (so halves, ops and their heartbeats share batch
boundaries) and, per micro-batch, appends:

    valid halves + the half topic's heartbeat  -> system/half_messages   (one file)
    valid ops    + the op topic's heartbeat    -> system/op_records      (one file)
    everything else, with the reason           -> system/quarantine

Each append is idempotent (streams/delta_writes.py: marked with this checkpoint's app id
and the batch id), so a batch replayed after a crash writes nothing twice. The Kafka
source reads every partition up to its latest offset each batch (no maxOffsetsPerTrigger):
a batch then holds everything stored before it was planned, in every partition, and the
coordinator never sees one partition's rows far ahead of another's. Heartbeats go into the same
commit as the data they follow, and each commit is a single file, which the coordinator
reads whole: event time can never get ahead of rows still to be read.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.config import Config
from coordinator.failpoints import failpoint
from delta_tables import half_messages, op_records, quarantine
from streams.batch_gate import BatchGate
from streams.delta_writes import BatchLedger, checkpoint_app_id
from streams.ingest import IngestRules, halves, ops, parse, quarantined, stamp, ticks
from streams.step_timer import StepTimer
from streams.tally import Tally

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

QUERY_NAME = "txcoord-ingest"
#: The ingest consumers' fetch.max.wait.ms (see `ingress_records`).
FETCH_MAX_WAIT_MS = 10


def rules_of(config: Config) -> IngestRules:
    """Return the validation rules the configuration implies."""
    return IngestRules(
        half_topic=config.kafka.half_topic,
        op_topic=config.kafka.op_topic,
        max_message_size=config.max_message_size,
        default_queue_count=config.default_queue_count,
        max_check_immunity_seconds=int(config.max_check_immunity.total_seconds()),
    )


def _with_heartbeat(rows: DataFrame, beat: DataFrame, kind: str) -> DataFrame:
    """Return `rows` plus the heartbeat as a row of `kind` TICK with only times and position."""
    fixed = {"kind": F.lit(kind), "transaction_id": F.lit(half_messages.HEARTBEAT_ID)}
    filler = [
        fixed[name].alias(name) if name in fixed else F.col(name)
        if name in beat.columns else F.lit(None).cast(rows.schema[name].dataType).alias(name)
        for name in rows.columns
    ]  # fmt: skip
    return rows.unionByName(beat.select(*filler))


class IngestBatchWriter:
    """The foreachBatch function of the ingest query."""

    def __init__(
        self,
        config: Config,
        app_id: str,
        tally: Tally | None = None,
        gate: BatchGate | None = None,
    ) -> None:
        self.config = config
        self.tally = tally or Tally()
        self.rules = rules_of(config)
        self.ledger = BatchLedger(app_id)
        self.warehouse = config.warehouse
        self.gate = gate or BatchGate()

    def __call__(self, records: DataFrame, batch_id: int) -> None:
        """Land one micro-batch of ingress records, unless the query is stopping."""
        with self.gate.batch(records.sparkSession, batch_id):
            self.land(records, batch_id)

    def land(self, records: DataFrame, batch_id: int) -> None:
        """Land one micro-batch of ingress records."""
        timer = StepTimer()
        parsed = parse(records, self.rules).persist()
        ingested_at = F.lit(datetime.now(UTC).replace(tzinfo=None)).cast("timestamp")
        classified = stamp(parsed, ingested_at)
        try:
            # One small job says which tables this batch touches: a Delta commit costs a
            # third of a second here, so a table with nothing to add gets no commit at all.
            # The real topic too: pending halves per topic are a metric (rocketmq_half_messages).
            with timer.step("read"):
                by_topic = {
                    (row.source_topic, row.bad, row.is_tick, row.topic): row["count"]
                    for row in parsed.groupBy(
                        "source_topic", F.col("reason").isNotNull().alias("bad"), "is_tick",
                        "topic",
                    ).count().collect()
                }  # fmt: skip
            counts: Counter[tuple[str, bool, bool]] = Counter()
            for (source, bad, tick, _), n in by_topic.items():
                counts[source, bad, tick] += n
            touched = {(topic, bad) for topic, bad, _ in counts}
            for topic, table, rows, kind in (
                (self.rules.half_topic, half_messages.TABLE, halves, half_messages.KIND_TICK),
                (self.rules.op_topic, op_records.TABLE, ops, op_records.KIND_TICK),
            ):
                if (topic, False) in touched:
                    landed = _with_heartbeat(
                        rows(classified, self.rules), ticks(classified, topic), kind
                    )
                    with timer.step(table.name):
                        self.ledger.append(landed.coalesce(1), table.path(self.warehouse), batch_id)
                    failpoint(f"ingest.after_{table.name.rsplit('/', 1)[-1]}")
            if any(bad for _, bad in touched):
                with timer.step(quarantine.TABLE.name):
                    self.ledger.append(
                        quarantined(classified), quarantine.TABLE.path(self.warehouse), batch_id
                    )
                failpoint("ingest.after_quarantine")
            failpoint("ingest.after_batch")
            self.tally.add(
                halves=counts.get((self.rules.half_topic, False, False), 0),
                ops=counts.get((self.rules.op_topic, False, False), 0),
                quarantined=sum(n for (_, bad, _), n in counts.items() if bad),
            )
            self.tally.add_by_topic(halves={
                real: n for (source, bad, tick, real), n in by_topic.items()
                if source == self.rules.half_topic and not bad and not tick and real
            })  # fmt: skip
            log.info("ingest batch %d: %s", batch_id, timer.summary())
        finally:
            parsed.unpersist()


def ingress_records(spark: SparkSession, config: Config) -> DataFrame:
    """Return the streaming Kafka source over both ingress topics."""
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", config.kafka.bootstrap_servers)
        .option("subscribe", f"{config.kafka.half_topic},{config.kafka.op_topic}")
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        # Spark's reader asks for each partition's offset range after every poll (two
        # ListOffsets requests). By then the consumer has pipelined its next fetch, which
        # the broker holds at the log's end for fetch.max.wait.ms (500 ms by default), and
        # a broker answers one connection in order: each partition of each batch waited
        # ~0.5-1 s for nothing (measured: 2.5 s of a 4 s idle batch). Ten ms bounds that.
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

    `gate` lets an orderly stop wait for the batch in flight (streams/batch_gate.py).
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
