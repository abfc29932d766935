"""The decision query: one query lands every ingress record and decides every transaction.

    Kafka: txcoord.half + txcoord.op ──parse (streams/ingest/transforms.py)── withWatermark
      (halves, ops, heartbeats)             (store time of the valid records, skew)
                                             └► groupBy (group, id).transformWithState
                                                (JVM, EventTime): decisions, and every
                                                record once more as a LAND row
                                                      ──► foreachBatch: land, then decide
      system/half_messages, op_records, quarantine ◄── 1. land (streams/ingest/landing_query.py)
      topics/<topic>, system/* tables, check topic ◄── 2. write the decisions

One query, one micro-batch for both jobs (contract 1: every half and op lands in Delta at the
latest in the micro-batch that acts on it, appended idempotently before the decisions are
written). A separate ingest query feeding this one through Delta cost a whole second
micro-batch of latency on every decision, and twice the fixed cost of a batch.

The stage (streams/stage/processor.py; its processor runs in the JVM, streams/jvm/) is
the join of halves and ops: it keeps, per (producer group, transaction id), what arrived of
either side, matches a half with the first decisive op of its group (either may come first:
an op waits `orphan_wait` for its half), and emits deliveries, checks, outcomes and verdicts
(rules: streams/jvm/txcoord/Lifecycle.java; its readable model tests/reference/lifecycle.py).
A half with no decisive op within `transaction_timeout` of its store time (the join window,
contract 1) is checked; later checks follow every `transaction_check_interval`. A
transaction is identified by (producer group, transaction id) (contract 3): the stage is
keyed by both, so two groups may use the same id without touching each other.

Every decision is made in store time
-----------------------------------------------
Store time is the broker's LogAppendTime, never a producer's clock (contract 9). The stage runs
in event time: its timers (checks, discards, expiries, orphans) are store times, and fire
only once the watermark has passed them, i.e. once the stream has seen everything stored up
to then. An op stored before a check or a discard was due has therefore always been seen
first, and wins (tests/reference/lifecycle.py). The watermark is the largest store time read so far
minus `store_time_skew`, the margin for partitions whose store times trail each other
slightly. Invalid records never reach it (a CreateTime record may carry any clock).

*Stall* (contract 7.4). With no traffic no record arrives and the watermark would stay put. The
ticker (streams/kafka_io/ticker.py) writes a heartbeat into every partition of both ingress topics
each `tick_interval` while a timer may come due (`tick_pace`: after any batch that landed a
record or decided anything, and at every start; every `idle_tick_interval` otherwise): the
watermark follows the wall clock, so a quiet half is checked ~`transaction_timeout` + skew
+ a batch or two after it was stored (each heartbeat is sent just before a batch starts, and
the skew is less than a trigger interval: streams/kafka_io/ticker.py). In the per-group
topic layout (coordinator/core/topics.py) the heartbeats stay on the shared topics: the watermark is
one for the whole query, and a batch plans every partition of every subscribed topic at
once, so a heartbeat on a shared topic vouches for a group's topic exactly as it does for
another partition of its own topic (the same `store_time_skew` covers both). A group's
topic created later is found by the pattern when a batch is planned and read from its
start.

*Running ahead* (contract 7.5). Each batch reads every partition of both topics up to the
offsets it planned (no maxOffsetsPerTrigger), so a heartbeat it has read never claims a
time beyond a record it has not: after a long stop, the backlog is read in one batch and
none of it is late. The stage's input carries store times as plain numbers (no event-time
column), so Spark never drops a row as late: one that came later than the skew allows is
still decided, only later than due; the count of such rows is zero in every test (Spark's
numRowsDroppedByWatermark of the stage).

**Upgrade note.** A checkpoint written by an earlier version (reading the Delta tables of a
separate ingest query, a watermark join feeding a Python stage in processing time, or keyed
by transaction id alone) cannot be resumed: the source or the state changed. The checkpoint
records its layout (STATE_LAYOUT_FILE) and its partition count (Spark's offset log); one that
this configuration cannot resume is refused at start (`state_problem`, before Spark starts
for a local checkpoint folder), naming `txcoord state rebuild`, which builds a new generation
of the checkpoint with the state moved or derived from the warehouse
(streams/state/rebuild.py, streams/checkpoint/generations.py).

Per-batch work follows the batch: the stage keeps its state in RocksDB and touches only the
keys of the batch; the writer appends only the batch's rows and reads
`system/queue_offsets`, which has one row per queue.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError
from delta_tables.half_messages import HEARTBEAT_ID
from streams.checkpoint.checkpoint_files import Files, files_of, is_local
from streams.checkpoint.generations import (
    STATE_LAYOUT_FILE,
    CheckpointFacts,
    active_facts,
    active_generation,
    generation_name,
    interrupted_rebuild,
)
from streams.ingest.land_rows import RAW_PREFIX, pass_through
from streams.ingest.landing_query import IngestBatchWriter, ingress_records
from streams.ingest.landing_query import rules_of as ingest_rules_of
from streams.ingest.topic_admission import TopicAdmission
from streams.ingest.transforms import KIND_HALF, KIND_OP, IngestRules, parse
from streams.kafka_io.check_publisher import CheckPublisher
from streams.kafka_io.delivery_notices import DeliveryNotices
from streams.kafka_io.tick_pace import TickPace
from streams.progress.tally import Tally
from streams.query.batch_writer import CoordinatorBatchWriter
from streams.stage.lifecycle import Rules
from streams.stage.processor import INPUT_SCHEMA, decisions
from streams.writes.batch_gate import BatchGate
from streams.writes.delta_writes import checkpoint_app_id
from streams.writes.writer_fence import claim_epoch

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

QUERY_NAME = "txcoord-coordinator"


def rules_of(config: Config) -> Rules:
    """Return the lifecycle rules, in milliseconds, that the configuration implies."""

    def ms(delta: timedelta) -> int:
        return int(delta.total_seconds() * 1000)

    timeout = ms(config.transaction_timeout)
    return Rules(
        timeout_ms=timeout,
        check_interval_ms=ms(config.transaction_check_interval),
        check_max=config.transaction_check_max,
        file_reserved_ms=ms(config.file_reserved_time),
        resolved_retention_ms=ms(config.streams.resolved_retention),
        # An op may reach the stage before its half (another partition, a producer's retry):
        # it waits two timeouts and a margin for it (contract 7.4's bound on a first check).
        orphan_wait_ms=2 * timeout + 10_000,
        max_check_immunity_ms=ms(config.max_check_immunity),
    )


def _side(name: str, is_half: Column, is_op: Column, decided: Column) -> Column:
    """Return stage-input column `name` (INPUT_SCHEMA) from a parsed ingress record.

    Store times cross as epoch milliseconds: the stage's input then has no event-time
    column, so Spark filters no row as late (see the module docstring).
    """
    if name == "transaction_id":  # heartbeats and invalid records: HEARTBEAT_ID (only landed)
        return F.when(decided, F.col(name)).otherwise(F.lit(HEARTBEAT_ID)).alias(name)
    if name == "producer_group":
        return F.when(decided, F.col(name)).alias(name)
    prefix, _, source = name.partition("_")
    side = is_half if prefix == "h" else is_op
    value = {
        "stored_ms": F.unix_millis(F.col("stored_at")),
        "reason": F.col("reason_text"),  # an operator's reason; `reason` is validation's
        "operator": F.col(
            "who"
        ),  # the principal, in the per-group layout (coordinator/core/topics.py)
    }.get(source, F.col(source))
    return F.when(side, value).cast(INPUT_SCHEMA[name].dataType).alias(name)


def tick_pace(config: Config) -> TickPace:
    """Return the ticker's pace for this configuration (streams/kafka_io/tick_pace.py).

    Its horizon is the longest span from a batch to a timer that batch sets (a first check,
    an orphan's wait, a next check or discard), and its margin what carries the watermark
    past a due time: the skew, a heartbeat and the batch that reads it.
    """
    rules = rules_of(config)
    streams = config.streams
    horizon_ms = max(rules.timeout_ms, rules.check_interval_ms, rules.orphan_wait_ms)
    return TickPace(
        horizon=timedelta(milliseconds=horizon_ms),
        margin=streams.store_time_skew + 2 * streams.tick_interval + 2 * streams.trigger_interval,
        idle_interval=streams.idle_tick_interval,
    )


#: The watermark's column: a valid record's store time; the epoch for an invalid one.
_EVENT_TIME = "_event_time"


def stage_input(parsed: DataFrame, rules: IngestRules, skew_seconds: float) -> DataFrame:
    """Return the stateful stage's input: every record, with its parsed columns passed through
    (streams/ingest/land_rows.py), a valid half or op also as the stage's columns (pure).

    `parsed` is streams/ingest/transforms.py's `parse` of the Kafka ingress records. An invalid
    record (quarantined by the writer) moves no watermark: a CreateTime record may carry any clock,
    so its event time is the epoch, which a maximum never picks. Invalid records and heartbeats go
    to the heartbeat's key, where the stage only lands them. Nothing is filtered: every record must
    come back as a LAND row.
    """
    valid = F.col("reason").isNull()
    timed = parsed.select(
        *pass_through(parsed),
        F.when(valid, F.col("stored_at"))
        .otherwise(F.timestamp_seconds(F.lit(0)))
        .alias(_EVENT_TIME),
        *[F.col(name) for name in parsed.columns],
    ).withWatermark(_EVENT_TIME, f"interval {skew_seconds} seconds")
    decided = valid & ~F.col("is_tick")
    is_half = decided & (F.col("ingress_kind") == KIND_HALF)
    is_op = decided & (F.col("ingress_kind") == KIND_OP)
    return timed.select(
        *[_side(name, is_half, is_op, decided) for name in INPUT_SCHEMA.fieldNames()],
        *[F.col(RAW_PREFIX + name) for name in parsed.columns],
    )


#: How the coordinator's state is keyed and kept, recorded beside its checkpoint when it
#: starts fresh: v4 keeps each transaction's state as bytes (streams/jvm/txcoord/StateCodec.java).
STATE_LAYOUT = "store-time stage v4, state as bytes, reading Kafka: producer_group,transaction_id"


def state_problem(
    held: CheckpointFacts, partitions: int, interrupted: str | None = None
) -> str | None:
    """Return why the checkpoint `held` cannot be resumed with `partitions` shuffle
    partitions, and the command that moves its state (None: it can). `interrupted`: the
    generation of a rebuild that started and did not finish.

    A checkpoint that has batches but no layout record was written by a version keyed by
    transaction id alone (see the module docstring's upgrade note).
    """
    if interrupted is not None:
        return (
            f"a rebuild of the coordinator's state was interrupted ({interrupted} is "
            f"half-built, and {held.name} is still the checkpoint): finish it with the same "
            f"command, txcoord state rebuild"
        )
    if not held.has_batches:
        return None
    if held.layout != STATE_LAYOUT:
        written_by = f"state: {held.layout}" if held.layout else "keyed by transaction id alone"
        return (
            f"the coordinator checkpoint {held.name} was written by an earlier txcoord "
            f"({written_by}); this version keeps {STATE_LAYOUT!r}. Rebuild its state from "
            f"the warehouse (the coordinator stopped): txcoord state rebuild --from warehouse"
        )
    if held.shuffle_partitions is not None and held.shuffle_partitions != partitions:
        return (
            f"the coordinator checkpoint {held.name} splits its state into "
            f"{held.shuffle_partitions} partitions, and spark.shuffle_partitions is "
            f"{partitions}: Spark would silently keep {held.shuffle_partitions}. Move the "
            f"state to {partitions} partitions (the coordinator stopped): txcoord state "
            f"rebuild --partitions {partitions}; or set spark.shuffle_partitions = "
            f"{held.shuffle_partitions}"
        )
    return None


def _interrupted(files: Files) -> str | None:
    generation = interrupted_rebuild(files)
    return generation_name(generation) if generation is not None else None


def check_coordinator_state(config: Config, spark: SparkSession | None = None) -> None:
    """Refuse a checkpoint this configuration cannot resume, with the command that fixes it.

    Without `spark` only a local checkpoint folder is checked (before a session starts: a
    refusal must not cost Spark's start-up); a remote one is checked once Spark runs.
    """
    directory = config.streams.checkpoint_dir
    if spark is None and not is_local(directory):
        return
    files = files_of(directory, spark)
    if problem := state_problem(
        active_facts(files), config.spark.shuffle_partitions, _interrupted(files)
    ):
        raise ConfigurationError(problem)


def checkpoint_of(config: Config, spark: SparkSession | None = None) -> str:
    """Return the location of the coordinator checkpoint in use (streams/checkpoint/generations.py;
    a remote checkpoint folder is read through `spark`)."""
    files = files_of(config.streams.checkpoint_dir, spark)
    return f"{files.root}/{generation_name(active_generation(files))}"


def take_kafka_ids(config: Config) -> tuple[CheckPublisher, DeliveryNotices]:
    """Return the check and notice publishers of `config`'s warehouse, each holding its
    transactional id: every older coordinator's producers of the warehouse are fenced on
    Kafka, and the transaction each left open aborted (streams/kafka_io/kafka_fence.py).

    Before a claim of the writer epoch, so that after the claim an older coordinator
    publishes nothing. Side by side: each init waits for an earlier holder's open
    transaction to be aborted.
    """
    checks, notices = CheckPublisher(config), DeliveryNotices(config)
    with ThreadPoolExecutor(2, thread_name_prefix="kafka-ids") as pool:
        taken = [pool.submit(checks.connect), pool.submit(notices.connect)]
    failures = [error for error in (future.exception() for future in taken) if error]
    if failures:
        checks.close()
        notices.close()
        raise failures[0]
    return checks, notices


def start_coordinator(
    spark: SparkSession,
    config: Config,
    tally: Tally | None = None,
    gate: BatchGate | None = None,
    pace: TickPace | None = None,
) -> tuple[StreamingQuery, CoordinatorBatchWriter]:
    """Start the decision query (topics and tables must exist); return it and its writer.

    `pace`, if given, is told of every batch that may have set a timer (the ticker's).
    """
    files = files_of(config.streams.checkpoint_dir, spark)
    held = active_facts(files)
    if problem := state_problem(held, config.spark.shuffle_partitions, _interrupted(files)):
        raise ConfigurationError(problem)
    if held.layout is None:  # a new checkpoint
        files.write_new(f"{held.name}/{STATE_LAYOUT_FILE}", STATE_LAYOUT)
    return run_coordinator(
        spark, config, f"{files.root}/{held.name}", tally=tally, gate=gate, pace=pace
    )


def run_coordinator(
    spark: SparkSession,
    config: Config,
    checkpoint: str,
    *,
    tally: Tally | None = None,
    gate: BatchGate | None = None,
    pace: TickPace | None = None,
    initial: DataFrame | None = None,
    applied: JavaObject | None = None,
    starting_offsets: str = "earliest",
    available_now: bool = False,
) -> tuple[StreamingQuery, CoordinatorBatchWriter]:
    """Start the decision query on `checkpoint`; return it and its writer.

    A new checkpoint starts from the state `initial` (streams/state/rebuild.py; `applied`, a
    JVM LongAccumulator, counts its transactions as they are loaded) and the Kafka offsets
    `starting_offsets`; `available_now` reads what Kafka holds now and stops.
    """
    ingest_rules = ingest_rules_of(config)
    # Kafka is read by as many tasks as the session has cores, whatever its partitions: a
    # task has a fixed cost (closures, generated projections, a fetch) however few its rows,
    # and more tasks than cores only queue.
    cores = spark.sparkContext.defaultParallelism
    records = ingress_records(spark, config, starting_offsets)
    app_id = checkpoint_app_id(spark, checkpoint, "coordinator")
    # The new topics a half may bring in (streams/ingest/topic_admission.py), set between batches.
    admission = TopicAdmission(spark, config, app_id) if config.auto_create_topic_enable else None
    parsed = parse(
        records.coalesce(cores), ingest_rules, None if admission is None else admission.jvm
    )
    rows = stage_input(parsed, ingest_rules, config.streams.store_time_skew.total_seconds())
    # Before anything is written: from here on no older coordinator commits (contract 7.10),
    # on Kafka (its producers fenced by ours) and then in the warehouse (the claim).
    checks, notices = take_kafka_ids(config)
    try:
        fence = claim_epoch(spark, config.warehouse, app_id, checkpoint)
    except BaseException:
        checks.close()
        notices.close()
        raise
    lander = IngestBatchWriter(config, app_id, tally, fence=fence)
    writer = CoordinatorBatchWriter(
        config,
        app_id,
        lander.tally,
        gate,
        lander=lander,
        pace=pace,
        fence=fence,
        admission=admission,
        checks=checks,
        notices=notices,
    )
    writer.prepare(spark)
    stream = (
        decisions(rows, rules_of(config), initial, applied)
        .writeStream.queryName(QUERY_NAME)
        .foreachBatch(writer)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(
            processingTime=f"{config.streams.trigger_interval.total_seconds()} seconds"
        )
    return stream.start(), writer
