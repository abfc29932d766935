"""The coordinator query: a watermark join finds the unresolved, a timer stage checks them.

    system/half_messages ──withWatermark(stored_at, T)──┐
                                                        ├─ LEFT OUTER JOIN ─┐
    system/op_records (COMMIT/ROLLBACK + heartbeats) ───┘  (group, id,      │
                       withWatermark(stored_at, T)          window ±T)      ├─ union ─► groupBy
    system/op_records (every op, "raw") ────────────────────────────────────┘  (group, id)
                                                                                .transformWithState
                                                                                (ProcessingTime)
                                                                                   │ foreachBatch
                                       topics/<topic>, system/* tables, check topic ◄┘

A transaction is identified by (producer group, transaction id) (SPEC 3): the join matches a
half only with an op of its own group, and the stage is keyed by both, so two groups may use
the same id without touching each other; an op whose group sent no half with that id is that
group's orphan.

**Upgrade note: a checkpoint written by a version keyed by transaction id alone cannot be
resumed.** The join's and the stage's state keys changed. The checkpoint records its layout
(`STATE_LAYOUT_FILE`); a checkpoint with batches and without that record is refused at start
with this explanation (`check_state_layout`), before Spark would fail on the state. A fresh
coordinator checkpoint (`<checkpoint_dir>/coordinator` moved aside) reads both tables from
their start as a new writer (streams/delta_writes.py) and would deliver already committed
messages again, so it is only right for a warehouse whose topic tables may be rebuilt
(move `topics/*`, `system/queue_offsets` and the coordinator's output tables aside with
it); there is no in-place migration of the old state.

T = transaction_timeout. The join matches a half with a decisive op stored within T of it
(either side first: ops may arrive before their half); a matched pair leaves at once, and the
stateful stage commits or rolls back. A half with no match leaves the join when the
watermark passes its window, ~2T after it was stored (the watermark trails event time by T,
and the window reaches T past the half): the stage sends check 1 and then, in processing
time, a check every `transaction_check_interval` until an op comes (raw ops reach the stage
directly, since check answers come long after the window), `transaction_check_max` checks
went unanswered, or the half is older than `file_reserved_time` (streams/lifecycle.py).

Event time: neither stalled nor ahead
-------------------------------------
The watermark is the minimum over both inputs of (largest store time seen - T), and store
time is the broker's LogAppendTime, never a producer's clock, so no row carries a future
time that would push the watermark past everyone else's (SPEC 9).

*Stall* (SPEC 7.4). With no traffic no row arrives, the watermark stays put and the join
never gives up on anything. The ingest's ticker writes a heartbeat into every partition of
both ingress topics each `tick_interval`; the ingest lands one heartbeat row per table per
batch, so both inputs always advance with the wall clock: a hanging half leaves the join
~2T + ingest latency + one trigger after it was stored. The stage's own timers are in
processing time and fire without input (a no-data batch), so later checks need no traffic.

*Running ahead* (SPEC 7.5). A heartbeat is stored by the same broker, in the same
partitions, after the data before it, and lands in the same Delta commit as the data of its
ingest batch; each ingest commit is a single file holding everything stored before the
batch was planned (the ingest reads every partition to its end). This query reads Delta in
commit order and never splits a file, so the heartbeats it has seen never claim a time
beyond data it has not read: after a long stop, the backlog is read commit by commit and
none of it is late. The remaining risk is a commit split across batches by the Delta
source's file limit, which cannot happen to a single-file commit. Spark's own count of rows
dropped by the watermark is logged and exposed, and the tests assert it stays zero.

Per-batch work follows the batch: the join and the stage keep their state in RocksDB and
touch only the keys of the batch; the writer appends only the batch's rows and reads
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
from streams.coordinator_processor import (
    INPUT_SCHEMA,
    KEY,
    OUTPUT_SCHEMA,
    TransactionProcessor,
)
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


def _side(alias: str) -> list[Column]:
    """Return the stage-input columns `<alias>_*` taken from the join side `alias`."""
    columns = []
    for name in INPUT_SCHEMA.fieldNames():
        if not name.startswith(f"{alias}_"):
            continue
        source = name.removeprefix(f"{alias}_")
        if source == "stored_ms":  # times cross into Python as epoch milliseconds
            columns.append(F.unix_millis(F.col(f"{alias}.stored_at")).alias(name))
        else:
            columns.append(F.col(f"{alias}.{source}").alias(name))
    return columns


def stage_input(halves: DataFrame, ops: DataFrame, timeout_seconds: float) -> DataFrame:
    """Return the stateful stage's input: join results plus every op (pure transform)."""
    interval = f"interval {timeout_seconds} seconds"
    left = halves.withWatermark("stored_at", interval).alias("h")
    decisive = ops.where(
        (F.col("kind") == op_records.KIND_TICK) | F.col("op").isin("COMMIT", "ROLLBACK")
    )
    right = decisive.withWatermark("stored_at", interval).alias("o")
    # A transaction is (group, id): a half matches only its own group's ops. The group is
    # compared null-safely (<=>): heartbeat rows have no group, and a plain `=` would let
    # Spark infer `producer_group IS NOT NULL` and push it below the watermark, hiding the
    # heartbeats from the very operator they exist to move (see HEARTBEAT_ID).
    joined = left.join(
        right,
        F.expr(
            f"h.transaction_id = o.transaction_id AND h.producer_group <=> o.producer_group "
            f"AND o.stored_at BETWEEN h.stored_at - {interval} AND h.stored_at + {interval}"
        ),
        "leftOuter",
    )
    # No filter on the join's output: Spark would push it below the watermark and hide the
    # heartbeats from it. Heartbeat rows (transaction id HEARTBEAT_ID) reach the stateful
    # stage as one group per batch, which ignores it.
    matched = joined.select(
        *[F.col(f"h.{key}").alias(key) for key in KEY], *_side("h"), *_side("o")
    )
    raw = (
        ops.alias("o")
        .where(F.col("o.kind") == op_records.KIND_OP)
        .select(
            *[F.col(f"o.{key}").alias(key) for key in KEY],
            *[F.lit(None).cast(INPUT_SCHEMA[name].dataType).alias(name)
              for name in INPUT_SCHEMA.fieldNames() if name.startswith("h_")],
            *_side("o"),
        )
    )  # fmt: skip
    return matched.unionByName(raw)


def decisions(stage_rows: DataFrame, rules: Rules) -> DataFrame:
    """Return the stateful stage's output for the stage input."""
    return stage_rows.groupBy(*KEY).transformWithState(
        TransactionProcessor(rules),
        outputStructType=OUTPUT_SCHEMA,
        outputMode="Append",
        timeMode="ProcessingTime",
    )


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
STATE_LAYOUT = "producer_group,transaction_id"
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
        written_by = f"keyed by {recorded}" if recorded else "keyed by transaction id alone"
        raise ConfigurationError(
            f"the coordinator checkpoint {checkpoint} was written by an earlier txcoord "
            f"({written_by}); this version keys a transaction by (producer group, transaction "
            f"id) and cannot resume it. Either run the earlier version, or start afresh: move "
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
    rows = stage_input(halves, ops, config.transaction_timeout.total_seconds())
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
