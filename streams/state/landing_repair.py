"""A rebuild from the warehouse, first: land what a crash left unlanded, then read Kafka on.

The state is derived from the warehouse (streams/state/warehouse_state.py), and the new query reads
Kafka from where the warehouse says every record is landed. A crash between the landing
tables' commits of one batch (streams/ingest/landing_query.py) leaves that batch half landed: one
table holds its records, another does not, in any order within a partition; and the batch's
decisions, written beside its landing, may already name records no table holds (a half delivered
whose row is missing). Reading Kafka on from after the newest record any table holds lost the rest
(issue 60.3); reading the whole batch again into the new query would show the stage records the
derived state already holds (an UNKNOWN op judged twice) and decide a half whose decision the
derivation could not see without its row a second time.

So the rebuild completes the landing first, from what every landing commit records
(streams/ingest/landing_coverage.py), and only then derives the state:

- the newest batch of any table began at the largest `before` of the tables' newest commits
  (every record below it is landed) and ended at most at the largest `after` (no record at
  or above it is landed): Kafka is read again between the two, a batch's worth. The output
  tables' newest commits count too: a batch's decisions carry its coverage, and may have
  committed when none of its landing commits had;
- each record read is landed in its table unless that table holds it: below its own newest
  commit's `after` it holds all of its records (a commit holds all of its batch's rows for
  it), above that none;
- the new query reads Kafka from the largest `after`: every record before it is now landed,
  and the derived state holds it, with whatever the batch had decided on it.

The repair's commits carry coverage as a batch's do (from the largest `before`), so a rebuild
killed halfway through it repairs the same range again, and lands only what is still missing.
A table whose newest marked commit carries no coverage (written before coverage existed)
counts by its rows; when none carries any, the rule before coverage applies (after the newest
record any table holds) and nothing is repaired.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from coordinator.core.config import Config
from delta_tables import half_messages, known_topics, op_records, quarantine
from delta_tables.registry import warehouse_tables
from delta_tables.table import table_path
from streams.ingest.landing_coverage import (
    LANDING_TABLES,
    Coverage,
    Offsets,
    TableMark,
    landed_ends,
    merged,
)
from streams.ingest.landing_query import IngestBatchWriter, rules_of
from streams.ingest.topic_admission import TopicAdmission
from streams.ingest.transforms import KIND_HALF, parse
from streams.writes.delta_writes import newest_mark
from streams.writes.writer_fence import WriterFence

log = logging.getLogger(__name__)

#: Kafka's "from the start of the partition" in Spark's offsets JSON.
EARLIEST = -2


def _ingress_range(spark: SparkSession, config: Config, start: Offsets, end: Offsets) -> DataFrame:
    """Return the ingress records from `start` (absent: the partition's start) to `end`
    (exclusive) of every partition `end` names, with the Kafka source's columns."""
    kafka = config.kafka
    ending = {topic: {str(p): o for p, o in parts.items()} for topic, parts in end.items()}
    return (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .options(**kafka.security.spark_options())
        .option("assign", json.dumps({topic: sorted(parts) for topic, parts in end.items()}))
        .option(
            "startingOffsets",
            json.dumps(
                {
                    topic: {str(p): start.get(topic, {}).get(p, EARLIEST) for p in parts}
                    for topic, parts in end.items()
                }
            ),
        )
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", "true")
        # Records Kafka no longer keeps (a stop longer than the topic's retention) cannot be
        # landed by anyone: the engine warns of such an outage at its start.
        .option("failOnDataLoss", "false")
        .load()
    )


def unlanded(parsed: pa.Table, held: Mapping[str, Offsets]) -> pa.Table:
    """Return the records of `parsed` (streams/ingest/transforms.py `parse`, as Arrow) that their
    table does not hold: each at or above `held[table]`, its table's landed end."""
    tables = [
        quarantine.TABLE.name
        if reason is not None
        else (half_messages.TABLE.name if kind == KIND_HALF else op_records.TABLE.name)
        for reason, kind in zip(
            parsed["reason"].to_pylist(), parsed["ingress_kind"].to_pylist(), strict=True
        )
    ]
    keep = [
        offset >= held.get(table, {}).get(topic, {}).get(partition, 0)
        for table, topic, partition, offset in zip(
            tables,
            parsed["source_topic"].to_pylist(),
            parsed["source_partition"].to_pylist(),
            parsed["source_offset"].to_pylist(),
            strict=True,
        )
    ]
    return parsed.filter(pa.array(keep, pa.bool_()))


@dataclass(frozen=True)
class Repair:
    """What a rebuild reads again and lands (see the module docstring)."""

    begun: Offsets  # every record below is landed: Kafka is read again from here
    gap: Offsets  # up to here (exclusive), in the partitions that may miss records
    held: dict[str, Offsets]  # per table: below it, the table holds all its records
    resume: Offsets  # then the new query reads Kafka from here


def repair_of(
    marks: Mapping[str, TableMark],
    by_rows: Mapping[str, Offsets],
    partitions_now: Mapping[str, Iterable[int]],
    decided: Iterable[Coverage] = (),
) -> Repair:
    """Return the repair the landing tables' newest `marks` call for; `by_rows`: the ends of
    the tables whose mark carries no coverage (`landed_ends`); `partitions_now`: every
    ingress topic's partitions now (a topic gone since is not read); `decided`: the coverage
    of the other tables' newest commits (a batch's decisions may commit before its landing
    does: only they may know the newest batch)."""
    known = [mark.coverage for mark in marks.values() if mark.coverage is not None]
    known += list(decided)
    old_rule = merged(*by_rows.values())
    if not known:  # the rule before coverage: after the newest record any table holds
        return Repair(begun=old_rule, gap={}, held=dict(by_rows), resume=old_rule)
    begun = merged(*[coverage.before for coverage in known])
    ended = merged(*[coverage.after for coverage in known])
    held = {
        name: mark.coverage.after if mark.coverage is not None else by_rows.get(name, {})
        for name, mark in marks.items()
    }
    gap: Offsets = {}
    for topic, parts in ended.items():
        now = set(partitions_now.get(topic, ()))
        for partition, end in parts.items():
            if partition in now and end > begun.get(topic, {}).get(partition, 0):
                gap.setdefault(topic, {})[partition] = end
    return Repair(begun=begun, gap=gap, held=held, resume=merged(ended, old_rule))


def repair_landing(
    spark: SparkSession,
    config: Config,
    partitions_now: Mapping[str, Iterable[int]],
    *,
    app_id: str,
    fence: WriterFence | None = None,
    progress: Callable[[str], None] = log.info,
) -> Offsets:
    """Land the ingress records the last landing batch left unlanded (see the module
    docstring), as writer `app_id`; return where Kafka is read from next, per partition (a
    partition absent: from its start). `partitions_now`: every ingress topic's partitions
    now (a topic gone since is not read)."""
    warehouse = config.warehouse

    def newest(name: str) -> dict[str, Any] | None:
        return newest_mark(spark, table_path(warehouse, name))

    landing = [spec.name for spec in LANDING_TABLES]
    marks = {name: TableMark.of(newest(name)) for name in landing}
    decided = [  # the newest batch may have committed a decision and no landing
        coverage
        for name in warehouse_tables(warehouse)
        if name not in landing and (coverage := Coverage.of_mark(newest(name))) is not None
    ]
    unknown = [name for name, mark in marks.items() if mark.coverage is None]
    repair = repair_of(marks, landed_ends(spark, config, unknown), partitions_now, decided)
    if repair.gap:
        records = _ingress_range(spark, config, repair.begun, repair.gap)
        # The topic limits as that batch knew them (streams/ingest/topic_admission.py).
        own = TableMark.of(newest(known_topics.TABLE.name))
        admission = _admission_of(spark, config, own, repair.begun)
        read = parse(records, rules_of(config), admission).toArrow()
        missing = unlanded(read, repair.held)
        progress(
            f"the last landing batch read again: {read.num_rows} ingress records, "
            f"{missing.num_rows} of them not landed, which land now"
        )
        if missing.num_rows:
            lander = IngestBatchWriter(config, app_id, fence=fence, landed_from=repair.begun)
            lander.land_rows(spark, missing, 0)
    return repair.resume


def _admission_of(spark: SparkSession, config: Config, newest: TableMark, begun: Offsets) -> Any:
    """Return the topic limits' JVM holder as the batch read again knew them (None without
    auto-create): the rows of `system/known_topics` but those that batch wrote itself, when
    its newest commit (`newest`) is that batch's (it moved a partition past `begun`)."""
    if not config.auto_create_topic_enable:
        return None
    app_id, batch_id = newest.batch if newest.batch is not None else ("", 0)
    ours = newest.coverage is not None and any(
        end > begun.get(topic, {}).get(partition, 0)
        for topic, parts in newest.coverage.after.items()
        for partition, end in parts.items()
    )
    admission = TopicAdmission(spark, config, app_id if ours else "")
    admission.prepare()
    admission.before_batch(batch_id)
    return admission.jvm


def batches_recorded(spark: SparkSession, config: Config) -> bool:
    """Return True if any table of the warehouse has a commit of a coordinator batch that
    records its coverage (the newest marked commit of the table)."""
    warehouse = config.warehouse
    return any(
        Coverage.of_mark(newest_mark(spark, table_path(warehouse, name))) is not None
        for name in warehouse_tables(warehouse)
    )
