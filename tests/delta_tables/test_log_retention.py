"""Every table keeps its Delta log for `streams.log_retention` (delta_tables/log_retention.py).

Real Delta tables on disk, read back by both Spark's Delta and delta-rs, and on an S3 API
(moto's server) through delta-rs.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from coordinator.protocol.deliveries import delta_rs_location
from delta_tables import topics
from delta_tables.log_retention import keep_log_with_spark, keep_logs_for
from delta_tables.registry import SYSTEM_TABLES, create_system_tables
from delta_tables.table import (
    LOG_RETENTION_PROPERTY,
    REMOVED_FILES_PROPERTY,
    interval_property,
    parse_interval,
)

pytestmark = pytest.mark.spark

WEEK, HOUR = timedelta(days=7), timedelta(hours=1)


def spark_properties(spark: SparkSession, location: str) -> tuple[str, str]:
    """Return (log retention, removed files retention) as Spark's Delta reads them."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{location}`").first()
    assert detail is not None
    properties = detail["properties"]
    return properties[LOG_RETENTION_PROPERTY], properties[REMOVED_FILES_PROPERTY]


def rust_properties(location: str) -> tuple[str, str]:
    """Return (log retention, removed files retention) as delta-rs reads them."""
    configuration = DeltaTable(delta_rs_location(location)).metadata().configuration
    return configuration[LOG_RETENTION_PROPERTY], configuration[REMOVED_FILES_PROPERTY]


def test_intervals_are_written_in_their_largest_whole_unit_and_read_back() -> None:
    assert interval_property(HOUR) == "interval 1 hours"
    assert interval_property(WEEK) == "interval 1 weeks"
    assert interval_property(timedelta(minutes=90)) == "interval 90 minutes"
    assert interval_property(timedelta(seconds=61.5)) == "interval 61 seconds"
    for duration in (HOUR, WEEK, timedelta(minutes=90), timedelta(days=3), timedelta(seconds=7)):
        assert parse_interval(interval_property(duration)) == duration
    assert parse_interval("interval 1 week") == WEEK
    assert parse_interval("INTERVAL 36 hours") == timedelta(hours=36)
    assert parse_interval("1 week") is None
    assert parse_interval(None) is None


def test_tables_are_created_with_the_retention_and_existing_ones_get_it_once(
    spark: SparkSession, warehouse: Path
) -> None:
    home = str(warehouse)
    create_system_tables(spark, home, WEEK)  # a warehouse of an earlier setting
    topic = topics.table("OrderPaid").create_if_absent(spark, home, WEEK)
    assert rust_properties(topic) == ("interval 1 weeks", "interval 1 weeks")
    month = topics.table("OrderMonthly").create_if_absent(spark, home, timedelta(days=30))
    assert spark_properties(spark, month) == ("interval 30 days", "interval 1 weeks")
    names = [spec.name for spec in SYSTEM_TABLES] + ["topics/OrderMonthly", "topics/OrderPaid"]
    assert keep_logs_for(spark, home, HOUR) == names
    assert keep_logs_for(spark, home, HOUR) == []  # nothing left to change
    for name in names:
        location = f"{home}/{name}"
        assert rust_properties(location) == ("interval 1 hours", "interval 1 hours"), name
        assert spark_properties(spark, location) == ("interval 1 hours", "interval 1 hours")
    assert keep_logs_for(spark, home, timedelta(minutes=60)) == []  # the same duration


def test_spark_sets_the_retention_of_a_table_it_cannot_reach_with_delta_rs(
    spark: SparkSession, warehouse: Path
) -> None:
    """The path a warehouse on a Hadoop file system delta-rs cannot reach takes (hdfs://,
    abfss://...), on a local table."""
    location = topics.table("OrderShipped").create_if_absent(spark, str(warehouse), WEEK)
    assert keep_log_with_spark(spark, location, HOUR)
    assert not keep_log_with_spark(spark, location, HOUR)
    assert spark_properties(spark, location) == ("interval 1 hours", "interval 1 hours")
    assert rust_properties(location) == ("interval 1 hours", "interval 1 hours")


def test_a_warehouse_on_s3_gets_the_retention_without_a_spark_job(
    spark: SparkSession, s3_warehouse: str
) -> None:
    """On an S3 API every table, topics too, is read and altered by delta-rs from the driver
    (this session's Spark has no credentials for it: a Spark job would fail)."""
    create_system_tables(spark, s3_warehouse, WEEK)
    topics.table("OrderPaid").create_if_absent(spark, s3_warehouse, WEEK)
    names = [spec.name for spec in SYSTEM_TABLES] + ["topics/OrderPaid"]
    assert keep_logs_for(spark, s3_warehouse, HOUR) == names
    assert keep_logs_for(spark, s3_warehouse, HOUR) == []  # nothing left to change
    for name in names:
        location = f"{s3_warehouse}/{name}"
        assert rust_properties(location) == ("interval 1 hours", "interval 1 hours"), name
