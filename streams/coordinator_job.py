"""The coordinator query: one keyed stage, in store time, decides every transaction.

    system/half_messages ──withWatermark(stored_at, skew)──┐
                                                           ├─ union ─► groupByKey (group, id)
    system/op_records ─────withWatermark(stored_at, skew)──┘           .transformWithState
      (halves, ops, and both tables' heartbeats)                        (JVM, EventTime)
                                                                          │ foreachBatch
                                   topics/<topic>, system/* tables, check topic ◄┘

The stage (streams/coordinator_stage.py; its processor runs in the JVM, streams/jvm/) is
the join of halves and ops: it keeps, per (producer group, transaction id), what arrived of
either side, matches a half with the first decisive op of its group (either may come first:
an op waits `orphan_wait` for its half), and emits deliveries, checks, outcomes and verdicts
(rules: streams/lifecycle.py). A half with no decisive op within `transaction_timeout` of
its store time (the join window, SPEC 1) is checked; later checks follow every
`transaction_check_interval`. A transaction is identified by (producer group, transaction
id) (SPEC 3): the stage is keyed by both, so two groups may use the same id without
touching each other.

Every decision is made in store time (issue 16)
-----------------------------------------------
Store time is the broker's LogAppendTime, never a producer's clock (SPEC 9). The stage runs
in event time: its timers (checks, discards, expiries, orphans) are store times, and fire
only once the watermark has passed them, i.e. once the stream has seen everything stored up
to then. An op stored before a check or a discard was due has therefore always been seen
first, and wins (streams/lifecycle.py). The watermark is the minimum over both tables of
(largest store time seen - `store_time_skew`), the margin for partitions whose store times
trail each other slightly.

*Stall* (SPEC 7.4). With no traffic no row arrives and the watermark would stay put. The
ingest's ticker writes a heartbeat into every partition of both ingress topics each
`tick_interval`, landed as one heartbeat row per table per batch: the watermark follows the
wall clock, so a quiet half is checked ~`transaction_timeout` + skew + a tick + two batches
after it was stored.

*Running ahead* (SPEC 7.5). A heartbeat is stored by the same broker, in the same
partitions, after the data before it, and lands in the same Delta commit as the data of its
ingest batch; each ingest commit is a single file holding everything stored before the
batch was planned. This query reads Delta in commit order and never splits a file, so the
heartbeats it has seen never claim a time beyond data it has not read: after a long stop,
the backlog is read commit by commit and none of it is late. The stage's input carries
store times as plain numbers (no event-time column), so Spark never drops a row as late:
one that came later than the skew allows is still decided, only later than due; the count
of such rows is zero in every test (Spark's numRowsDroppedByWatermark of the stage).

**Upgrade note.** A checkpoint written by an earlier version (a watermark join feeding a
Python stage in processing time, or keyed by transaction id alone) cannot be resumed: the
state changed. The checkpoint records its layout (`STATE_LAYOUT_FILE`); one with batches and
another layout is refused at start with this explanation (`check_state_layout`). A fresh
coordinator checkpoint (`<checkpoint_dir>/coordinator` moved aside) reads both tables from
their start as a new writer (streams/delta_writes.py) and would deliver already committed
messages again, so it is only right for a warehouse whose topic tables may be rebuilt
(move `topics/*`, `system/queue_offsets` and the coordinator's output tables aside with
it); there is no in-place migration of the old state.

Per-batch work follows the batch: the stage keeps its state in RocksDB and touches only the
keys of the batch; the writer appends only the batch's rows and reads
`system/queue_offsets`, which has one row per queue.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.config import Config
from coordinator.errors import ConfigurationError
from delta_tables import half_messages, op_records
from streams.coordinator_stage import INPUT_SCHEMA, decisions
from streams.coordinator_writer import CoordinatorBatchWriter
from streams.delta_writes import (
    checkpoint_app_id,
    checkpoint_file,
    checkpoint_has_batches,
    read_checkpoint_file,
)
from streams.lifecycle import Rules
from streams.tally import Tally

if TYPE_CHECKING:
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
        # An op may precede its half by up to one ingest batch, and a half the join has not
        # matched reaches the stage ~2T after it was stored: wait that long, and a margin.
        orphan_wait_ms=2 * timeout + 10_000,
        max_check_immunity_ms=ms(config.max_check_immunity),
    )


def _stage_columns(side: str) -> list[Column]:
    """Return the stage-input columns of a half ("h") or an op ("o") row, NULL for the other.

    Store times cross as epoch milliseconds: the stage's input then has no event-time
    column, so Spark filters no row as late (see the module docstring).
    """
    columns = []
    for name in INPUT_SCHEMA.fieldNames():
        prefix, _, source = name.partition("_")
        if name in ("producer_group", "transaction_id"):  # the key
            columns.append(F.col(name))
        elif prefix != side:
            columns.append(F.lit(None).cast(INPUT_SCHEMA[name].dataType).alias(name))
        elif source == "stored_ms":
            columns.append(F.unix_millis(F.col("stored_at")).alias(name))
        else:
            columns.append(F.col(source).alias(name))
    return columns


def stage_input(halves: DataFrame, ops: DataFrame, skew_seconds: float) -> DataFrame:
    """Return the stateful stage's input: every half and op, and the heartbeats (pure)."""
    interval = f"interval {skew_seconds} seconds"
    # Heartbeat rows (transaction id HEARTBEAT_ID, no group) must reach the watermark: no
    # filter here, Spark would push it below withWatermark. The stage ignores their key.
    left = halves.withWatermark("stored_at", interval)
    right = ops.withWatermark("stored_at", interval)
    return left.select(*_stage_columns("h")).unionByName(right.select(*_stage_columns("o")))


def read_table(spark: SparkSession, location: str, max_files_per_trigger: int) -> DataFrame:
    """Return a Delta table as a stream, read in commit order."""
    return (
        spark.readStream.format("delta")
        # Compaction (maintenance) rewrites files without changing data: skip those commits.
        .option("skipChangeCommits", "true")
        .option("maxFilesPerTrigger", max_files_per_trigger)
        .load(location)
    )


#: How the coordinator's state is keyed, recorded beside its checkpoint when it starts fresh.
STATE_LAYOUT = "store-time stage v2: producer_group,transaction_id"
STATE_LAYOUT_FILE = "_txcoord_state_layout"


def check_state_layout(spark: SparkSession, checkpoint: str) -> None:
    """Refuse a checkpoint whose state is keyed otherwise than this version keys it.

    A checkpoint that has batches but no layout record was written by a version keyed by
    transaction id alone (see the module docstring's upgrade note).
    """
    recorded = read_checkpoint_file(spark, checkpoint, STATE_LAYOUT_FILE)
    if recorded is None and not checkpoint_has_batches(spark, checkpoint):
        checkpoint_file(spark, checkpoint, STATE_LAYOUT_FILE, STATE_LAYOUT)  # a new checkpoint
        return
    if recorded != STATE_LAYOUT:
        written_by = f"state: {recorded}" if recorded else "keyed by transaction id alone"
        raise ConfigurationError(
            f"the coordinator checkpoint {checkpoint} was written by an earlier txcoord "
            f"({written_by}); this version keeps {STATE_LAYOUT!r} and cannot resume it. "
            f"Either run the earlier version, or start afresh: move "
            f"the checkpoint aside together with the warehouse's topics/ and the coordinator's "
            f"system tables (a fresh checkpoint would deliver committed messages again)"
        )


def checkpoint_of(config: Config) -> str:
    """Return the coordinator query's checkpoint location."""
    return f"{config.streams.checkpoint_dir.rstrip('/')}/coordinator"


def start_coordinator(
    spark: SparkSession, config: Config, tally: Tally | None = None
) -> tuple[StreamingQuery, CoordinatorBatchWriter]:
    """Start the coordinator query (the tables must exist); return it and its writer."""
    limit = config.streams.max_files_per_trigger
    halves = read_table(spark, half_messages.TABLE.path(config.warehouse), limit)
    ops = read_table(spark, op_records.TABLE.path(config.warehouse), limit)
    rules = rules_of(config)
    rows = stage_input(halves, ops, config.streams.store_time_skew.total_seconds())
    checkpoint = checkpoint_of(config)
    check_state_layout(spark, checkpoint)
    writer = CoordinatorBatchWriter(
        config, checkpoint_app_id(spark, checkpoint, "coordinator"), tally
    )
    seconds = config.streams.trigger_interval.total_seconds()
    query = (
        decisions(rows, rules)
        .writeStream.queryName(QUERY_NAME)
        .foreachBatch(writer)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{seconds} seconds")
        .start()
    )
    return query, writer
