"""`txcoord state rebuild`: a new generation of the coordinator's checkpoint, the state moved.

The stage's state (every live transaction with its check count and timer, every decided one
kept to judge late ops) is split into as many partitions as the checkpoint was created with,
and only that checkpoint can resume it. A rebuild makes a new generation of the checkpoint
(streams/checkpoint/generations.py) with any number of partitions:

1. *Finish the old generation.* A batch it planned but did not commit may have written part
   of its output under the old checkpoint's app id; only the old query can finish it
   (streams/writes/delta_writes.py: a replay skips what is written). If there is one, the old query
   runs once more, reading what Kafka holds now, and stops (Trigger.AvailableNow).
2. *Read its state* through Spark's state data source (`format("statestore")`, the value
   state "transaction" at the last committed batch): one row per transaction, each with its
   own timer, its bytes read as StageRows.STATE's fields (streams/jvm/txcoord/StateCodec.java).
3. *Start the new generation* from that state (transformWithState's initial state,
   applied in the checkpoint's first batch), with `spark.sql.shuffle.partitions` = N and
   Kafka read from the offsets the old generation's last batch committed: every ingress
   record is decided once, by the old query or by the new one. The new checkpoint has an
   app id of its own, so none of its batches can look already written, and none of the old
   is written again (the old ones all committed). Its first batch runs at once (one
   heartbeat into every partition), and it stops.
4. *Switch*: ACTIVE_MARK is written into the new generation, in one step, last. The old
   generation stays, unused, for inspection; older ones are deleted.

What the new generation starts from is recorded first (REBUILD_FILE): a rebuild killed at
any moment leaves the old generation in use (the engine refuses to start while a rebuild
with batches is unfinished) and running the command again finishes the same rebuild (its
first batch replays, with the same initial state and offsets) or, when it never started
a batch, redoes it.

The coordinator should be stopped while a rebuild runs. One still running is fenced before
the rebuild reads anything (a writer epoch claimed and put on every table first:
streams/writes/writer_fence.py): it stops at its next batch without writing, and the rebuild's
check that the old generation did not move meanwhile tells the operator.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError, TxcoordError
from coordinator.core.failpoints import failpoint
from delta_tables import queue_offsets
from delta_tables.registry import warehouse_tables
from delta_tables.table import table_path
from streams.checkpoint.checkpoint_files import Files, files_of
from streams.checkpoint.generations import (
    ACTIVE_MARK,
    PARTITIONS_CONF,
    REBUILD_FILE,
    STATE_LAYOUT_FILE,
    active_facts,
    active_generation,
    facts,
    generation_name,
    generations,
    interrupted_rebuild,
)
from streams.kafka_io.ingress_topics import ingress_partitions
from streams.kafka_io.ticker import Ticker
from streams.query.decision_query import STATE_LAYOUT, rules_of, run_coordinator, take_kafka_ids
from streams.stage.processor import KEY, state_schema
from streams.state.decision_repair import repair_decisions
from streams.state.landing_repair import EARLIEST, repair_landing
from streams.state.warehouse_state import derived_state, queue_offsets_behind
from streams.writes.arrow_rows import arrow_schema
from streams.writes.delta_writes import BatchLedger
from streams.writes.writer_fence import WriterFence, claim_epoch

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

    from streams.query.batch_writer import CoordinatorBatchWriter

log = logging.getLogger(__name__)

#: Where a rebuild takes the state from.
SOURCES = ("checkpoint", "warehouse")
#: The stage's state variable (streams/jvm/txcoord/TransactionProcessor.java).
STATE_VARIABLE = "transaction"
#: The state derived from the warehouse, kept in the new generation (Parquet): a rebuild
#: finished after a kill -9 starts from exactly the state its first attempt started from.
#: Not named `_...`: Spark's file listing skips such paths as hidden.
DERIVED_STATE = "derived-state"

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    """How a new generation starts: recorded in it before its query runs."""

    source: str  # "checkpoint" | "warehouse"
    partitions: int
    starting_offsets: dict[str, dict[str, int]]
    from_generation: str | None = None  # source "checkpoint": the generation read
    from_batch: int | None = None  # and its batch whose state is read
    derived_at_ms: int | None = None  # source "warehouse": when the state was derived

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def of_json(text: str) -> Plan:
        return Plan(**json.loads(text))


@dataclass(frozen=True)
class Rebuilt:
    """What a rebuild did."""

    generation: str  # the generation now in use
    previous: str  # the one it replaced (kept, unused)
    plan: Plan
    transactions: int  # state rows the new generation started from
    finished_batch: int | None  # the old generation's unfinished batch, finished first
    resumed: bool  # an interrupted rebuild was finished rather than started
    seconds: float


def _run_to_end(query: StreamingQuery, writer: CoordinatorBatchWriter) -> None:
    """Wait for an AvailableNow query to stop; raise what stopped it, if it failed."""
    try:
        query.awaitTermination()
        if query.exception() is not None:
            raise TxcoordError(f"the decision query failed: {query.exception()}")
    finally:
        writer.close()


def starting_offsets(config: Config, committed: Mapping[str, Mapping[str, int]]) -> str:
    """Return Spark's startingOffsets JSON: every partition the query subscribes to now, at
    its `committed` offset (the old generation's), or from its start if it had none.

    Spark wants every partition named; a topic the old generation read and that is gone is
    left out.
    """
    offsets: dict[str, dict[str, int]] = {}
    for name, numbers in ingress_partitions(config).items():
        held = committed.get(name, {})
        offsets[name] = {str(n): int(held.get(str(n), EARLIEST)) for n in numbers}
    return json.dumps(offsets, sort_keys=True)


def state_of_checkpoint(spark: SparkSession, checkpoint: str, batch: int) -> DataFrame:
    """Return the stage's state as of `batch` of `checkpoint`: the key, then STATE's fields."""
    spark.streams.active  # noqa: B018 - creates the state-store coordinator RocksDB reports to
    state = (
        spark.read.format("statestore")
        .option("path", checkpoint)
        .option("operatorId", 0)
        .option("batchId", batch)
        .option("stateVarName", STATE_VARIABLE)
        .load()
    )
    raw = state.select(*[f"key.{name}" for name in KEY], F.col("value.value").alias("value"))
    codec = spark.sparkContext._jvm.txcoord.StateCodec  # type: ignore[union-attr]
    return DataFrame(codec.decoded(raw._jdf), spark)


def _interrupted(files: Files) -> tuple[int, Plan] | None:
    """Return the generation of an interrupted rebuild (to finish) with its plan; delete any
    other generation newer than the one in use (it never started a batch: it holds nothing)."""
    found = interrupted_rebuild(files)
    for generation in generations(files):
        if generation > active_generation(files) and generation != found:
            files.delete(generation_name(generation))
    if found is None:
        return None
    recorded = files.text(f"{generation_name(found)}/{REBUILD_FILE}")
    assert recorded is not None
    return found, Plan.of_json(recorded)


def _start_from_checkpoint(
    spark: SparkSession,
    config: Config,
    files: Files,
    plan_of: Callable[[dict[str, dict[str, int]], str, int], Plan],
    progress: Progress,
) -> tuple[int, Plan, int | None]:
    """Finish the generation in use, record the plan of a new one from its state; return
    the new generation, its plan, and the batch finished first (if one was)."""
    old_generation = active_generation(files)
    old_name = generation_name(old_generation)
    finished = None
    old = facts(files, old_generation)
    if not old.has_batches:
        raise ConfigurationError(
            f"the coordinator checkpoint {files.root}/{old_name} holds no state yet: set "
            f"spark.shuffle_partitions and start the coordinator"
        )
    if old.layout != STATE_LAYOUT:
        raise ConfigurationError(
            f"the coordinator checkpoint {old_name} keeps another state layout "
            f"({old.layout or 'keyed by transaction id alone'}): rebuild from the warehouse"
        )
    if old.unfinished:
        finished = old.last_planned
        progress(f"finishing batch {finished} of {old_name} (it did not commit)")
        _run_to_end(*run_coordinator(spark, config, f"{files.root}/{old_name}", available_now=True))
        old = facts(files, old_generation)
    assert old.last_committed is not None and old.committed_offsets is not None
    plan = plan_of(
        json.loads(starting_offsets(config, old.committed_offsets)), old_name, old.last_committed
    )
    generation = max(generations(files)) + 1
    name = generation_name(generation)
    files.write_new(f"{name}/{REBUILD_FILE}", plan.to_json())
    files.write_new(f"{name}/{STATE_LAYOUT_FILE}", STATE_LAYOUT)
    return generation, plan, finished


def _start_from_warehouse(
    spark: SparkSession,
    config: Config,
    files: Files,
    partitions: int,
    *,
    progress: Progress,
    fence: WriterFence,
) -> tuple[int, Plan]:
    """Land what a crash left unlanded, derive the state and the Kafka offsets from the
    warehouse (streams/state/landing_repair.py, streams/state/warehouse_state.py), keep the state in
    a new generation and record its plan; return the generation and the plan."""
    generation = max(generations(files), default=0) + 1
    name = generation_name(generation)
    now_ms = int(time.time() * 1000)
    # First: a batch cut short between its landing commits left records unlanded, which
    # the derivation must see (streams/state/landing_repair.py).
    landed = repair_landing(
        spark,
        config,
        ingress_partitions(config),
        app_id=f"txcoord-rebuild-{name}-{now_ms}-landing",
        fence=fence,
        progress=progress,
    )
    # Then: a batch cut short between its decision commits left a delivery without its
    # final state, or a final state without its verdict; the derived state takes both as
    # written, so nothing later would write them (streams/state/decision_repair.py).
    repair_decisions(
        spark,
        config,
        app_id=f"txcoord-rebuild-{name}-{now_ms}-decisions",
        fence=fence,
        progress=progress,
    )
    progress("deriving the state from the warehouse")
    derived = derived_state(spark, config, rules_of(config), now_ms, state_schema(spark))
    derived.write.mode("overwrite").parquet(f"{files.root}/{name}/{DERIVED_STATE}")
    if behind := queue_offsets_behind(spark, config):
        progress(f"moving {len(behind)} queues' next offsets up to their topic tables")
        rows = pa.Table.from_pylist(
            [
                {"topic": topic, "queue_id": queue, "next_offset": offset, "batch_id": 0}
                for (topic, queue), offset in sorted(behind.items())
            ],
            schema=arrow_schema(queue_offsets.SCHEMA),
        )
        ledger = BatchLedger(f"txcoord-rebuild-{name}-{now_ms}", fence)
        ledger.append(rows, queue_offsets.TABLE.path(config.warehouse), 0, spark)
    committed = {topic: {str(p): o for p, o in parts.items()} for topic, parts in landed.items()}
    plan = Plan(
        source="warehouse",
        partitions=partitions,
        starting_offsets=json.loads(starting_offsets(config, committed)),
        derived_at_ms=now_ms,
    )
    files.write_new(f"{name}/{REBUILD_FILE}", plan.to_json())
    files.write_new(f"{name}/{STATE_LAYOUT_FILE}", STATE_LAYOUT)
    return generation, plan


def fence_the_warehouse(
    spark: SparkSession, config: Config, writer: str, checkpoint: str
) -> WriterFence:
    """Claim a writer epoch for `writer` and put it on every table of the warehouse: from
    now on no coordinator started before can commit there, nor publish on Kafka (its
    producers' transactional ids taken first, and released: the new generation's query
    takes them again, streams/kafka_io/kafka_fence.py)."""
    checks, notices = take_kafka_ids(config)
    checks.close()
    notices.close()
    fence = claim_epoch(spark, config.warehouse, writer, checkpoint)
    warehouse = config.warehouse
    fence.fence_tables([table_path(warehouse, name) for name in warehouse_tables(warehouse)])
    return fence


def _first_batch(
    spark: SparkSession,
    config: Config,
    files: Files,
    generation: int,
    *,
    plan: Plan,
    progress: Progress,
) -> int:
    """Run the new `generation` from its initial state until it has read what Kafka holds
    now; return how many transactions it started from."""
    name = generation_name(generation)
    location = f"{files.root}/{name}"
    if plan.from_generation is not None and plan.from_batch is not None:
        initial = state_of_checkpoint(
            spark,
            f"{files.root}/{plan.from_generation}",
            plan.from_batch,
        )
        origin = f"{plan.from_generation} (batch {plan.from_batch})"
    else:
        initial = spark.read.parquet(f"{location}/{DERIVED_STATE}")
        origin = "the warehouse"
    progress(f"starting {name} from the state of {origin}, {plan.partitions} partitions")
    # Counted as the first batch loads it: a pass of its own over 10^6 transactions read
    # from a checkpoint took 25 s.
    applied = spark.sparkContext._jsc.sc().longAccumulator(f"txcoord.rebuild.{name}")
    loaded_before = facts(files, generation).last_committed
    kafka = config.kafka
    Ticker(
        kafka.bootstrap_servers,
        [kafka.half_topic, kafka.op_topic],
        config.streams.tick_interval,
        kafka.security,
    ).beat()  # so that the first batch runs now, whatever producers do
    # A new checkpoint takes the session's number of partitions, and keeps it for ever.
    session_partitions = spark.conf.get(PARTITIONS_CONF)
    spark.conf.set(PARTITIONS_CONF, str(plan.partitions))
    try:
        _run_to_end(
            *run_coordinator(
                spark,
                config,
                location,
                initial=initial,
                applied=applied,
                starting_offsets=json.dumps(plan.starting_offsets, sort_keys=True),
                available_now=True,
            )
        )
    finally:
        spark.conf.set(PARTITIONS_CONF, str(session_partitions))
    # A first batch that committed before (a rebuild finished after a kill -9) loads nothing.
    count = int(applied.value()) if loaded_before is None else initial.count()
    progress(f"{name} started from {count} transactions of {origin}")
    return count


def holds_no_state(spark: SparkSession, config: Config) -> bool:
    """Return True if the coordinator checkpoint holds no state to resume (missing, empty, or
    never past its first batch) and no rebuild is under way in it."""
    files = files_of(config.streams.checkpoint_dir, spark)
    return not active_facts(files).has_batches and interrupted_rebuild(files) is None


def rebuild(
    spark: SparkSession,
    config: Config,
    partitions: int,
    source: str = "checkpoint",
    progress: Progress = log.info,
) -> Rebuilt:
    """Build a new generation of the coordinator's checkpoint with `partitions` partitions,
    its state from `source`, and switch to it (the coordinator stopped)."""
    if source not in SOURCES:
        raise ConfigurationError(f"a rebuild reads the state from {' or '.join(SOURCES)}")
    if partitions < 1:
        raise ConfigurationError(f"--partitions must be 1 or more, not {partitions}")
    started = time.monotonic()
    files = files_of(config.streams.checkpoint_dir, spark)
    # First, before anything is read: a coordinator still running is fenced now, at its next
    # batch or commit, and cannot write behind what the rebuild reads (contract 7.10).
    writer = f"txcoord-rebuild-{int(time.time() * 1000)}"
    fence = fence_the_warehouse(spark, config, writer, files.root)
    old_generation = active_generation(files)
    old_name = generation_name(old_generation)
    finished = None
    interrupted = _interrupted(files)
    if interrupted is not None:
        generation, plan = interrupted
        progress(
            f"finishing the rebuild interrupted in {generation_name(generation)} "
            f"({plan.partitions} partitions, from {plan.source})"
        )
    else:

        def plan_of(offsets: dict[str, dict[str, int]], name: str, batch: int) -> Plan:
            return Plan(source, partitions, offsets, from_generation=name, from_batch=batch)

        if source == "warehouse":
            generation, plan = _start_from_warehouse(
                spark, config, files, partitions, progress=progress, fence=fence
            )
        else:
            generation, plan, finished = _start_from_checkpoint(
                spark, config, files, plan_of, progress
            )
    name = generation_name(generation)
    failpoint("rebuild.planned")
    before = facts(files, old_generation)
    if plan.from_generation is not None and plan.from_batch != before.last_committed:
        raise TxcoordError(
            f"{plan.from_generation} moved on since the rebuild in {name} started (was the "
            f"coordinator started meanwhile?): delete {files.root}/{name} and rebuild again"
        )
    count = _first_batch(spark, config, files, generation, plan=plan, progress=progress)
    if facts(files, generation).last_committed is None:
        raise TxcoordError(f"{name} committed no batch: run the rebuild again")
    after = facts(files, old_generation)
    if (after.last_planned, after.last_committed) != (before.last_planned, before.last_committed):
        raise TxcoordError(
            f"{old_name} moved on during the rebuild: the coordinator runs. Stop it, delete "
            f"{files.root}/{name} and rebuild again"
        )
    failpoint("rebuild.before_switch")
    files.write_new(f"{name}/{ACTIVE_MARK}", json.dumps({"previous": old_name}))
    for older in generations(files):
        if older < old_generation:
            files.delete(generation_name(older))
    progress(f"{name} is the coordinator's checkpoint now; {old_name} is kept, unused")
    return Rebuilt(
        generation=name,
        previous=old_name,
        plan=plan,
        transactions=count,
        finished_batch=finished,
        resumed=interrupted is not None,
        seconds=time.monotonic() - started,
    )
