"""Every table keeps its Delta log's commit files for `streams.log_retention`, no longer.

The streams commit to each table they write about once a micro-batch, i.e. about once a
second under load, and Delta keeps a commit file for each version until the table's
`delta.logRetentionDuration` has passed (then the log cleanup after a checkpoint deletes
it). Every commit lists the table's `_delta_log` folder: delta-rs's appends twice (each
name turned into a path and compared, however old), and Spark's Delta writer and readers
list it too. So the history kept is paid for by every append (what an hour and a week
cost: docs/performance.md, decisions; `bench/delta_log_growth.py`).

Removed data files are kept as long (at most a week: Spark's Delta refuses a table that
keeps them longer than its log), so VACUUM never removes a file a kept version needs.

Tables are created with the setting (delta_tables/table.py); an existing table (a warehouse
from before the setting, or after the setting changed) gets it at the engine's start:
`keep_logs_for` sets the property where it differs. Delta applies a shorter retention at
the table's next log cleanup. Tables on disk or on an S3 API are read and altered with
delta-rs, from the driver (on a cluster, Spark's DESCRIBE DETAIL of each table was a job on
cold executors, a large part of the cluster profile's first start). In a warehouse on any other
Hadoop file system only the system tables are looked at, with Spark; a topic table there
keeps the retention it was created with.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from deltalake import DeltaTable as RustDeltaTable
from pyspark.sql import SparkSession

from delta_tables.registry import SYSTEM_TABLES, warehouse_tables
from delta_tables.table import (
    delta_rs_uri,
    parse_interval,
    retention_properties,
    spark_table_properties,
    table_path,
)

log = logging.getLogger(__name__)

__all__ = ["keep_log_for", "keep_log_with_spark", "keep_logs_for"]


def _differing(configuration: dict[str, str], retention: timedelta) -> dict[str, str]:
    """Return the retention properties `configuration` lacks or holds other durations of."""
    return {
        key: value
        for key, value in retention_properties(retention).items()
        if parse_interval(configuration.get(key)) != parse_interval(value)
    }


def keep_log_for(spark: SparkSession, location: str, retention: timedelta) -> bool:
    """Make the table at `location` keep its log's commit files for `retention`; return
    True when its properties had to change."""
    uri = delta_rs_uri(location)
    if uri is None:
        return keep_log_with_spark(spark, location, retention)
    table = RustDeltaTable(uri)
    changes = _differing(table.metadata().configuration, retention)
    if changes:
        # The commit's post-commit hook cleans the log up at once with the new retention.
        table.alter.set_table_properties(changes)
        log.info("table %s now keeps its history: %s", location, changes)
    return bool(changes)


def keep_log_with_spark(spark: SparkSession, location: str, retention: timedelta) -> bool:
    """`keep_log_for` through Spark's Delta (a Hadoop file system delta-rs cannot reach)."""
    changes = _differing(spark_table_properties(spark, location), retention)
    if changes:  # one statement: Delta checks removed files are kept no longer than the log
        pairs = ", ".join(f"'{key}' = '{value}'" for key, value in changes.items())
        spark.sql(f"ALTER TABLE delta.`{location}` SET TBLPROPERTIES ({pairs})")
        log.info("table %s now keeps its history: %s", location, changes)
    return bool(changes)


def keep_logs_for(spark: SparkSession, warehouse: str, retention: timedelta) -> list[str]:
    """Give every existing table of `warehouse` the log retention `retention`; return the
    names of the tables that changed."""
    if delta_rs_uri(warehouse) is not None:
        names = warehouse_tables(warehouse)
    else:
        names = [spec.name for spec in SYSTEM_TABLES]
    return [name for name in names if keep_log_for(spark, table_path(warehouse, name), retention)]
