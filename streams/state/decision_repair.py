"""Write the outcome rows a batch cut short left unwritten, before the state is derived.

A coordinator batch writes a decision as a chain of commits: the deliveries (the topic
tables), then `system/transactions` (the final state), then `system/op_verdicts` (the
verdict on the op that decided it) (streams/query/batch_writer.py). A crash between them
leaves a delivered transaction without its final state, or a final state without its
deciding op's verdict. With the checkpoint the batch is replayed and writes the rest; without
it (streams/state/rebuild.py) the state is derived from the warehouse, which takes a delivery
as committed (streams/state/derivation.py) and the deciding op as judged, so nothing would
ever write the missing rows: the transaction stays without a final state for good, and its
op without a verdict. This step writes them, as the batch would have:

- a COMMITTED final state for each delivery without one: decided by the delivery's commit op
  (reason "operator", "check" or "op", as the stage gives it), the number of the last check
  sent, resolved when delivered, in the delivery's batch;
- an APPLIED verdict for each op that decided a COMMITTED or ROLLED_BACK final state and has
  none, recorded when the final state was.

Both are anti-joins on what the tables hold, so the step is idempotent: a rebuild that
crashes after it and runs again writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.core.config import Config
from coordinator.core.state_machine import TransactionState, Verdict
from delta_tables import check_requests, op_records, op_verdicts, topics, transactions
from delta_tables.registry import warehouse_tables
from streams.stage.processor import KEY
from streams.writes.arrow_rows import arrow_schema
from streams.writes.delta_writes import BatchLedger
from streams.writes.writer_fence import WriterFence

COMMITTED, ROLLED_BACK = TransactionState.COMMITTED.name, TransactionState.ROLLED_BACK.name


def _table(spark: SparkSession, location: str) -> DataFrame:
    return spark.read.format("delta").load(location)


def _millis(column: str) -> Column:
    """`column` (a timestamp) as epoch milliseconds, `<name>_ms`: collected rows would
    otherwise carry datetimes in the Python process's local zone."""
    return F.unix_millis(F.col(column)).alias(column.removesuffix("_at") + "_ms")


def _utc(millis: int | None) -> datetime | None:
    return None if millis is None else datetime.fromtimestamp(millis / 1000, tz=UTC)


def _deliveries(spark: SparkSession, warehouse: str) -> DataFrame | None:
    """Every row of every topic table (the columns a final state takes), None if no topic."""
    frames = [
        _table(spark, topics.table(name.removeprefix("topics/")).path(warehouse)).select(
            *KEY,
            "msg_id",
            "topic",
            "queue_id",
            "prepared_at",
            "delivered_at",
            "commit_op_id",
            "batch_id",
        )
        for name in warehouse_tables(warehouse)
        if name.startswith("topics/")
    ]
    if not frames:
        return None
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def missing_finals(spark: SparkSession, config: Config) -> list[dict[str, object]]:
    """Return the COMMITTED final states the deliveries imply and `system/transactions`
    lacks (rows of its schema)."""
    warehouse = config.warehouse
    deliveries = _deliveries(spark, warehouse)
    if deliveries is None:
        return []
    finals = _table(spark, transactions.TABLE.path(warehouse))
    missing = deliveries.join(
        finals.where(F.col("state") == COMMITTED).select(*KEY).distinct(), list(KEY), "left_anti"
    )
    if missing.isEmpty():  # the usual case: one cheap scan, no join below
        return []
    # The stage's check count at the decision: the number of the last check sent
    # (streams/state/derivation.py counts a delivered one's checks the same way).
    last_check = (
        _table(spark, check_requests.TABLE.path(warehouse))
        .groupBy(*KEY)
        .agg(
            F.max_by("check_number", F.struct("requested_at", "batch_id", "check_number")).alias(
                "check_count"
            )
        )
    )
    ops = _table(spark, op_records.TABLE.path(warehouse)).where(F.col("kind") == op_records.KIND_OP)
    deciding = ops.select(
        F.col("op_id").alias("commit_op_id"), "operator", "from_check"
    ).dropDuplicates(["commit_op_id"])
    rows = (
        missing.join(last_check, list(KEY), "left")
        .join(deciding, "commit_op_id", "left")
        .select(
            *KEY,
            "msg_id",
            "topic",
            "queue_id",
            F.lit(COMMITTED).alias("state"),
            F.when(F.col("operator").isNotNull(), "operator")
            .when(F.col("from_check"), "check")
            .otherwise("op")
            .alias("reason"),
            F.coalesce("check_count", F.lit(0)).cast("int").alias("check_count"),
            F.col("commit_op_id").alias("deciding_op_id"),
            _millis("prepared_at"),
            _millis("delivered_at").alias("resolved_ms"),
            "batch_id",
        )
    )
    return [
        {**row.asDict(), "prepared_at": _utc(row.prepared_ms), "resolved_at": _utc(row.resolved_ms)}
        for row in rows.collect()
    ]


def missing_verdicts(
    spark: SparkSession, config: Config, finals: list[dict[str, object]]
) -> list[dict[str, object]]:
    """Return the APPLIED verdicts `system/op_verdicts` lacks for the ops that decided a
    COMMITTED or ROLLED_BACK final state (those of the table, and `finals` about to be
    written)."""
    warehouse = config.warehouse
    judged = _table(spark, op_verdicts.TABLE.path(warehouse)).select("op_id")
    recorded = (
        _table(spark, transactions.TABLE.path(warehouse))
        .where(F.col("state").isin(COMMITTED, ROLLED_BACK))
        .where(F.col("deciding_op_id").isNotNull())
        .select(F.col("deciding_op_id").alias("op_id"), _millis("resolved_at"), "batch_id")
        .join(judged, "op_id", "left_anti")
    )
    # op id -> (when its final state was resolved, its batch)
    decided = {row.op_id: (row.resolved_ms, row.batch_id) for row in recorded.collect()}
    new = {str(f["deciding_op_id"]): f for f in finals}
    if new:
        already = judged.where(F.col("op_id").isin(list(new))).distinct().collect()
        for op_id in set(new) - {row.op_id for row in already}:
            decided.setdefault(op_id, (new[op_id]["resolved_ms"], new[op_id]["batch_id"]))
    if not decided:
        return []
    ops = (
        _table(spark, op_records.TABLE.path(warehouse))
        .where((F.col("kind") == op_records.KIND_OP) & F.col("op_id").isin(list(decided)))
        .select("op_id", "transaction_id", "producer_group", "op", _millis("stored_at"))
        .dropDuplicates(["op_id"])
    )
    verdicts = []
    for op in ops.collect():
        resolved_ms, batch_id = decided[op.op_id]
        verdicts.append(
            {
                "op_id": op.op_id,
                "transaction_id": op.transaction_id,
                "producer_group": op.producer_group,
                "op": op.op,
                "verdict": Verdict.APPLIED.value,
                "detail": None,
                "stored_at": _utc(op.stored_ms),
                "recorded_at": _utc(resolved_ms),
                "batch_id": batch_id,
            }
        )
    return verdicts


def repair_decisions(
    spark: SparkSession,
    config: Config,
    *,
    app_id: str,
    fence: WriterFence,
    progress: Callable[[str], None],
) -> tuple[int, int]:
    """Write the final states and verdicts a batch cut short left unwritten; return how
    many of each. `app_id` names the writes (each table's one commit) for the fence."""
    warehouse = config.warehouse
    finals = missing_finals(spark, config)
    verdicts = missing_verdicts(spark, config, finals)
    if not finals and not verdicts:
        return 0, 0
    progress(
        f"writing {len(finals)} final states and {len(verdicts)} verdicts "
        "a batch cut short left unwritten"
    )
    ledger = BatchLedger(app_id, fence)
    # Final states first, as the batch writes them: a crash between the two leaves what
    # the next rebuild finds again.
    if finals:
        table = pa.Table.from_pylist(finals, schema=arrow_schema(transactions.SCHEMA))
        ledger.append(table, transactions.TABLE.path(warehouse), 0, spark)
    if verdicts:
        table = pa.Table.from_pylist(verdicts, schema=arrow_schema(op_verdicts.SCHEMA))
        ledger.append(table, op_verdicts.TABLE.path(warehouse), 0, spark)
    return len(finals), len(verdicts)
