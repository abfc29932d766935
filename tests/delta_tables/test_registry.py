"""Every system table is created (on disk, on an S3 API) as a real Delta table, readable by
Spark and delta-rs."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake import Schema as DeltaSchema
from pyspark.sql import SparkSession

from delta_tables import topics
from delta_tables.log_retention import keep_logs_for
from delta_tables.lookup import delta_uri
from delta_tables.object_store import filesystem
from delta_tables.registry import SYSTEM_TABLES, create_system_tables, warehouse_tables
from delta_tables.table import listed_version, local_directory

pytestmark = pytest.mark.spark


def test_system_tables_are_created_once_with_their_schema(
    spark: SparkSession, warehouse: Path
) -> None:
    locations = create_system_tables(spark, str(warehouse))
    assert set(locations) == {t.name for t in SYSTEM_TABLES}
    again = create_system_tables(spark, str(warehouse))  # idempotent: nothing recreated
    assert again == locations
    for spec in SYSTEM_TABLES:
        location = locations[spec.name]
        assert Path(location).is_relative_to(warehouse)
        frame = spark.read.format("delta").load(location)
        assert [f.name for f in frame.schema] == [f.name for f in spec.schema], spec.name
        assert frame.count() == 0
        detail = spark.sql(f"DESCRIBE DETAIL delta.`{location}`").first()
        assert detail is not None and detail["description"] == spec.description
        delta_rs = DeltaTable(location)
        assert delta_rs.version() == 0, spec.name  # created once, not twice
        configuration = delta_rs.metadata().configuration
        assert configuration["delta.logRetentionDuration"] == "interval 1 hours"  # the default
        assert configuration["delta.deletedFileRetentionDuration"] == "interval 1 hours"
        # Statistics only of the columns readers filter on (each append pays for them).
        assert configuration["delta.dataSkippingStatsColumns"] == ",".join(spec.stats_columns)


def test_topic_tables_live_under_topics(spark: SparkSession, warehouse: Path) -> None:
    location = topics.table("OrderPaid").create_if_absent(spark, str(warehouse))
    assert location == f"{warehouse}/topics/OrderPaid"
    columns = spark.read.format("delta").load(location).columns
    assert columns[:6] == [
        "transaction_id", "msg_id", "producer_group", "topic", "queue_id", "queue_offset",
    ]  # fmt: skip


def test_listed_version_follows_the_commits_and_agrees_with_delta(
    spark: SparkSession, warehouse: Path
) -> None:
    location = topics.table("OrderShipped").path(str(warehouse))
    assert listed_version(location) is None  # no table yet
    bare = warehouse / "bare"
    (bare / "_delta_log").mkdir(parents=True)
    assert listed_version(str(bare)) is None  # a log folder without a commit
    topics.table("OrderShipped").create_if_absent(spark, str(warehouse))
    assert listed_version(location) == 0
    assert topics.table("OrderShipped").create_if_absent(spark, str(warehouse)) == location
    assert listed_version(location) == 0  # an existing table is not created again
    grown = str(warehouse / "grown")
    for _ in range(3):
        spark.range(1).write.format("delta").mode("append").save(grown)
    assert listed_version(grown) == 2 == DeltaTable(grown).version()
    assert local_directory(f"file://{grown}") == grown
    assert local_directory("s3a://bucket/warehouse/topics/x") is None


def test_a_table_whose_creation_was_killed_is_created_again(
    spark: SparkSession, warehouse: Path
) -> None:
    """A kill -9 while a table was being created leaves its log folder empty: no table yet
    (delta-rs cannot open it, and an engine start that tried failed), created again."""
    (warehouse / "system" / "transactions" / "_delta_log").mkdir(parents=True)
    (warehouse / "topics" / "OrderPaid" / "_delta_log").mkdir(parents=True)
    assert warehouse_tables(str(warehouse)) == []
    create_system_tables(spark, str(warehouse))
    keep_logs_for(spark, str(warehouse), timedelta(hours=2))  # opens every table that exists
    assert "system/transactions" in warehouse_tables(str(warehouse))
    assert "topics/OrderPaid" not in warehouse_tables(str(warehouse))


def test_a_warehouse_on_s3_is_listed_as_one_on_disk(s3_warehouse: str) -> None:
    """The start's fence, the compactor and a state rebuild find every table of a warehouse
    on an S3 API: system and topic tables with a commit, not a log folder without one."""
    assert warehouse_tables(s3_warehouse) == []
    for name in ("system/transactions", "topics/OrderPaid", "topics/OrderShipped"):
        write_deltalake(delta_uri(s3_warehouse, name), pa.table({"n": [1]}))
    write_deltalake(
        delta_uri(s3_warehouse, "topics/OrderPaid"), pa.table({"n": [2]}), mode="append"
    )
    # A creation killed half way: a log folder holding no commit yet.
    fs, root = filesystem(f"{s3_warehouse}/topics/Broken/_delta_log/_tmp")
    with fs.open_output_stream(root) as out:
        out.write(b"")
    assert warehouse_tables(s3_warehouse) == [
        "system/transactions",
        "topics/OrderPaid",
        "topics/OrderShipped",
    ]
    assert listed_version(f"{s3_warehouse}/topics/OrderPaid") == 1
    assert listed_version(f"{s3_warehouse}/topics/Broken") is None


def test_system_tables_on_s3_are_created_without_a_spark_job(
    spark: SparkSession, s3_warehouse: str
) -> None:
    """On an S3 API, as on disk, delta-rs writes each table's first commit from the driver:
    Spark's creation reads the new log back with jobs, which a cluster's cold executors made
    take ~160 s for the nine tables. (This session's Spark has no credentials for the S3 API:
    it would fail. Spark reading and appending to such tables: test_cluster_profile.py.)"""
    jobs_before = len(spark.sparkContext.statusTracker().getJobIdsForGroup())
    locations = create_system_tables(spark, s3_warehouse)
    assert len(spark.sparkContext.statusTracker().getJobIdsForGroup()) == jobs_before
    assert create_system_tables(spark, s3_warehouse) == locations  # idempotent
    for spec in SYSTEM_TABLES:
        location = locations[spec.name]
        assert listed_version(location) == 0, spec.name  # created once
        table = DeltaTable(delta_uri(s3_warehouse, spec.name))
        assert table.schema().to_json() == DeltaSchema.from_json(spec.schema.json()).to_json()
        assert table.metadata().description == spec.description
        assert table.metadata().configuration == spec.configuration(timedelta(hours=1))
