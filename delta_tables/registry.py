"""All system tables, created together before any stream starts."""

from __future__ import annotations

import logging
from datetime import timedelta

import pyarrow.fs as pafs
from pyspark.sql import SparkSession

from coordinator.core.config import StreamsConfig
from coordinator.protocol.names import topic_name_problem
from delta_tables import (
    check_requests,
    discarded,
    half_messages,
    known_topics,
    op_records,
    op_verdicts,
    quarantine,
    queue_offsets,
    transactions,
    writers,
)
from delta_tables.object_store import filesystem, listing
from delta_tables.table import TableSpec, listed_version, table_path

log = logging.getLogger(__name__)
#: Topic folders already reported as set aside (once per process).
_SET_ASIDE: set[str] = set()

SYSTEM_TABLES: tuple[TableSpec, ...] = (
    half_messages.TABLE,
    op_records.TABLE,
    quarantine.TABLE,
    check_requests.TABLE,
    transactions.TABLE,
    discarded.TABLE,
    op_verdicts.TABLE,
    queue_offsets.TABLE,
    writers.TABLE,
    known_topics.TABLE,
)


#: The landed input, which an earlier coordinator read as Delta streams (a checkpoint of
#: that time still names their versions): vacuumed only when that is safe
#: (coordinator/admin/maintenance.py). Compacted like every other table: a compaction
#: commits with dataChange = false, which a Delta stream reader skips.
STREAMED: frozenset[str] = frozenset({half_messages.TABLE.name, op_records.TABLE.name})


def warehouse_tables(warehouse: str) -> list[str]:
    """Return every table of `warehouse` (local, or on an S3 API) that exists: system tables,
    then topics.

    A folder under `topics/` whose name is not a topic name today (an earlier version took
    '%' and '|') is set aside with a warning: delta-rs would open another path than that
    folder (it percent-decodes), and a start that fenced it failed, every time.
    """
    names = [spec.name for spec in SYSTEM_TABLES]
    fs, root = filesystem(warehouse)
    for info in listing(fs, f"{root}/topics"):
        if info.type != pafs.FileType.Directory:
            continue
        if problem := topic_name_problem(info.base_name):
            if info.base_name not in _SET_ASIDE:
                _SET_ASIDE.add(info.base_name)
                log.warning(
                    "topics/%s is set aside, not read or written: %s", info.base_name, problem
                )
            continue
        names.append(f"topics/{info.base_name}")
    # A table exists once its log has a commit: a kill -9 while one was being created can
    # leave an empty log folder behind, which no reader can open (create_if_absent makes it).
    return [name for name in names if listed_version(table_path(warehouse, name)) is not None]


def create_system_tables(
    spark: SparkSession, warehouse: str, log_retention: timedelta = StreamsConfig.log_retention
) -> dict[str, str]:
    """Create every system table that does not exist yet, keeping its log for
    `log_retention`; return {name: location}."""
    return {
        table.name: table.create_if_absent(spark, warehouse, log_retention)
        for table in SYSTEM_TABLES
    }
