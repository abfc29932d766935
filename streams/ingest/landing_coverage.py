"""Which ingress records are landed: the coverage every landing commit records.

One micro-batch lands its ingress records in three Delta commits, one per table
(`system/half_messages`, `system/op_records`, `system/quarantine`: streams/ingest/landing_query.py),
side by side. A crash between them leaves some of the batch's records landed and others not,
in any order within a partition: the newest record a table holds says nothing of the records
before it that another table was to land. So each landing commit says, beside its batch mark
(streams/writes/delta_writes.py), which part of the ingress the writer had landed (`Coverage`), per
topic and partition as the offset after the last record (`Offsets`):

- `before`: every record below it was landed (in whichever table it belongs to) when the
  batch began;
- `after`: the same once the batch ended, and no record at or above it is landed, in any
  table: a cumulative map over every partition the writer ever landed from, so that any
  table's newest commit describes them all, however long ago that table last had rows.

The writer keeps the map in memory from batch to batch (`CoverageKeeper`: a batch's `after`
is the previous one's, moved up to its own records). It reads the tables' newest marks only
at a start. The batch's other commits, its decisions (streams/query/batch_writer.py), carry
its coverage of the partitions it read from (`Coverage.moved`): they may commit before any
landing commit of the batch does, and must not then hide it.

A commit without coverage (written before coverage existed, or a table whose marked commits
have left the log: delta.logRetentionDuration) counts as unknown: when no landing table's
newest marked commit has coverage, the tables' rows themselves are read once (`landed_ends`,
the newest offset any table holds: the rule before coverage).

What a rebuild from the warehouse makes of it: streams/state/landing_repair.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable as RustDeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from coordinator.core.config import Config
from delta_tables import half_messages, op_records, quarantine
from delta_tables.table import delta_rs_uri
from streams.writes.delta_writes import MARK_APP_ID, MARK_BATCH_ID

log = logging.getLogger(__name__)

#: Per ingress topic and partition, the offset after the last record of some set.
Offsets = dict[str, dict[int, int]]
#: The landing tables, in the order their commits are made side by side.
LANDING_TABLES = (half_messages.TABLE, op_records.TABLE, quarantine.TABLE)
#: The `userMetadata` key of a landing commit's coverage (beside the batch mark's keys).
COVERAGE = "txcoord_ingress"


def merged(*maps: Mapping[str, Mapping[int, int]]) -> Offsets:
    """Return the partition-wise largest offset of `maps` (a partition absent: none)."""
    out: Offsets = {}
    for offsets in maps:
        for topic, partitions in offsets.items():
            mine = out.setdefault(topic, {})
            for partition, offset in partitions.items():
                if offset > mine.get(partition, -1):
                    mine[partition] = offset
    return out


def ends_of(parsed: pa.Table) -> Offsets:
    """Return the offset after the last record of each partition of `parsed` (ingress
    records with the `source_*` columns of streams/ingest/transforms.py's `parse`)."""
    if parsed.num_rows == 0:
        return {}
    grouped = pa.TableGroupBy(parsed, ["source_topic", "source_partition"]).aggregate(
        [("source_offset", "max")]
    )
    out: Offsets = {}
    for topic, partition, offset in zip(
        grouped["source_topic"].to_pylist(),
        grouped["source_partition"].to_pylist(),
        grouped["source_offset_max"].to_pylist(),
        strict=True,
    ):
        out.setdefault(topic, {})[int(partition)] = int(offset) + 1
    return out


def _encoded(offsets: Offsets) -> dict[str, dict[str, int]]:
    return {
        topic: {str(p): o for p, o in sorted(parts.items())} for topic, parts in offsets.items()
    }


def _decoded(raw: Any) -> Offsets:
    return {str(topic): {int(p): int(o) for p, o in parts.items()} for topic, parts in raw.items()}


@dataclass(frozen=True)
class Coverage:
    """What a batch's landing commits say of the ingress (see the module docstring)."""

    before: Offsets
    after: Offsets

    def metadata(self) -> dict[str, Any]:
        """Return the commit metadata that records this coverage: `after` in full, `before`
        only where it differs (the partitions the batch landed from; 0: none before)."""
        moved: Offsets = {}
        for topic, parts in self.after.items():
            for partition, offset in parts.items():
                start = self.before.get(topic, {}).get(partition, 0)
                if start != offset:
                    moved.setdefault(topic, {})[partition] = start
        return {COVERAGE: {"after": _encoded(self.after), "before": _encoded(moved)}}

    def moved(self) -> Coverage:
        """Return this coverage of the partitions the batch read records from alone: what
        the batch's other commits carry (its decisions), which need not describe the rest."""
        before: Offsets = {}
        after: Offsets = {}
        for topic, parts in self.after.items():
            for partition, offset in parts.items():
                start = self.before.get(topic, {}).get(partition, 0)
                if start != offset:
                    after.setdefault(topic, {})[partition] = offset
                    if start:
                        before.setdefault(topic, {})[partition] = start
        return Coverage(before, after)

    @staticmethod
    def of_mark(mark: Mapping[str, Any] | None) -> Coverage | None:
        """Return the coverage a commit's metadata (`newest_mark`) records, None without."""
        raw = (mark or {}).get(COVERAGE)
        if not isinstance(raw, Mapping):
            return None
        try:
            after = _decoded(raw["after"])
            before = {topic: dict(parts) for topic, parts in after.items()}
            for topic, parts in _decoded(raw["before"]).items():
                before.setdefault(topic, {}).update(parts)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None  # not ours after all
        # 0: nothing landed before, the same as no entry (read from the partition's start).
        kept = {topic: {p: o for p, o in parts.items() if o > 0} for topic, parts in before.items()}
        return Coverage({topic: parts for topic, parts in kept.items() if parts}, after)


@dataclass(frozen=True)
class TableMark:
    """A landing table's newest txcoord commit: its batch (app id, batch id), its coverage."""

    batch: tuple[str, int] | None
    coverage: Coverage | None

    @staticmethod
    def of(mark: Mapping[str, Any] | None) -> TableMark:
        """Return the mark of a commit's metadata (`delta_writes.newest_mark`)."""
        batch = None if mark is None else (str(mark[MARK_APP_ID]), int(mark[MARK_BATCH_ID]))
        return TableMark(batch, Coverage.of_mark(mark))


def covered(marks: Iterable[TableMark]) -> list[tuple[tuple[str, int] | None, Coverage]]:
    """Return the batch and coverage of the marks that carry coverage."""
    return [(mark.batch, mark.coverage) for mark in marks if mark.coverage is not None]


class CoverageKeeper:
    """The ingest writer's coverage, kept from batch to batch.

    At the first batch it lands after a start the tables' newest marks say where it stands:
    a batch that one of them already committed (Spark replays a batch whose commit it did not
    record) began where that commit says; any other batch began after every table's newest
    commit (the batch before it ended before it began). A writer told where it starts
    (`start`: a rebuild's repair, streams/state/landing_repair.py) begins there.
    """

    def __init__(self, app_id: str, start: Offsets | None = None) -> None:
        self.app_id = app_id
        self.start = start
        self.marks: dict[str, TableMark] = {}
        self._after: Offsets | None = None  # the last batch's `after`, once one landed
        self._by_rows: Offsets | None = None  # `landed`, asked once (no mark says)

    def know(self, table: str, mark: Mapping[str, Any] | None) -> None:
        """Take `table`'s newest mark (its commit metadata, read at the start)."""
        self.marks[table] = TableMark.of(mark)

    def of_batch(self, batch_id: int, parsed: pa.Table, landed: Callable[[], Offsets]) -> Coverage:
        """Return the coverage of batch `batch_id`, whose ingress records are `parsed`;
        `landed` returns what the tables hold when no mark says (`landed_ends`)."""
        if self._after is not None:
            before = ceiling = self._after
        else:
            known = covered(self.marks.values())
            ours = (self.app_id, batch_id)
            if self.start is not None:
                before = self.start
            elif known:
                before = merged(*[c.before if b == ours else c.after for b, c in known])
            else:  # read once: batches of heartbeats alone may come before the first landing
                if self._by_rows is None:
                    self._by_rows = landed()
                before = self._by_rows
            ceiling = merged(before, *[c.after for _, c in known])
        return Coverage(before, merged(ceiling, ends_of(parsed)))

    def landed(self, coverage: Coverage) -> None:
        """Record that a batch of `coverage` has landed in every table."""
        self._after = coverage.after


def _frame(spark: SparkSession, location: str) -> DataFrame:
    return spark.read.format("delta").load(location)


def holds_rows(location: str) -> bool:
    """Return True if the table at `location` holds any data file (or may: one only Spark
    writes, which is then read)."""
    uri = delta_rs_uri(location)
    if uri is None:
        return True
    if not RustDeltaTable.is_deltatable(uri):
        return False
    return len(RustDeltaTable(uri).file_uris()) > 0


def landed_ends(spark: SparkSession, config: Config, tables: Iterable[str]) -> dict[str, Offsets]:
    """Return, per landing table of `tables` (names), the offset after its last landed
    record of each ingress partition, from its rows (a Spark job over each table).

    Which topic a landed half or op came from is not in its row: it follows from the layout
    (the shared half and op topics; in the per-group layout a group's own topics, and an
    operator's op its operator topic; heartbeats stay on the shared topics). A quarantined
    record's row names it.
    """
    warehouse = config.warehouse
    layout = config.kafka.layout
    tick = F.col("kind") == half_messages.KIND_TICK
    half_topic = (
        F.when(tick, F.lit(layout.half)).otherwise(
            F.concat(F.lit(layout.half + "."), F.col("producer_group"))
        )
        if layout.per_group
        else F.lit(layout.half)
    )
    op_topic = (
        F.when(tick, F.lit(layout.op))
        .when(
            F.col("operator").isNotNull(),
            F.concat(F.lit(layout.operator + "."), F.col("operator")),
        )
        .otherwise(F.concat(F.lit(layout.op + "."), F.col("producer_group")))
        if layout.per_group
        else F.lit(layout.op)
    )
    position = {
        half_messages.TABLE.name: (half_topic, "ingress_partition", "ingress_offset"),
        op_records.TABLE.name: (op_topic, "ingress_partition", "ingress_offset"),
        quarantine.TABLE.name: (F.col("source_topic"), "source_partition", "source_offset"),
    }
    found: dict[str, Offsets] = {}
    for spec in LANDING_TABLES:
        if spec.name not in tables:
            continue
        ends: Offsets = {}
        found[spec.name] = ends
        location = spec.path(warehouse)
        if not holds_rows(location):
            continue
        topic, partition, offset = position[spec.name]
        rows = _frame(spark, location).select(
            topic.alias("topic"), F.col(partition).alias("partition"), F.col(offset).alias("at")
        )
        for row in rows.groupBy("topic", "partition").agg(F.max("at").alias("last")).collect():
            if row.topic is not None:
                ends.setdefault(row.topic, {})[int(row.partition)] = int(row.last) + 1
    return found
