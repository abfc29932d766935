"""Spark writes a Delta table and streams from it, exactly once across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

pytestmark = pytest.mark.spark

SCHEMA = "id long, payload string"


def copy_stream(spark: SparkSession, source: Path, target: Path, checkpoint: Path) -> None:
    """Run one availableNow stream from the source Delta table into the target."""
    query = (
        spark.readStream.format("delta")
        .load(str(source))
        .writeStream.format("delta")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start(str(target))
    )
    try:
        query.awaitTermination(120)
    finally:
        query.stop()
    assert query.exception() is None


def rows(spark: SparkSession, ids: range) -> DataFrame:
    return spark.createDataFrame([(i, f"payload-{i}") for i in ids], SCHEMA)


def test_delta_table_streams_each_row_once_across_runs(
    spark: SparkSession, warehouse: Path
) -> None:
    source, target, checkpoint = warehouse / "source", warehouse / "target", warehouse / "_cp"
    rows(spark, range(0, 50)).write.format("delta").save(str(source))
    copy_stream(spark, source, target, checkpoint)

    rows(spark, range(50, 80)).write.format("delta").mode("append").save(str(source))
    copy_stream(spark, source, target, checkpoint)
    copy_stream(spark, source, target, checkpoint)  # nothing new: must append nothing

    result = spark.read.format("delta").load(str(target))
    assert_df_equality(result, rows(spark, range(0, 80)), ignore_row_order=True)


def test_an_independent_reader_sees_the_same_table(spark: SparkSession, warehouse: Path) -> None:
    table = warehouse / "shared"
    rows(spark, range(0, 10)).write.format("delta").save(str(table))
    rows(spark, range(10, 15)).write.format("delta").mode("append").save(str(table))

    delta_rs = DeltaTable(str(table))
    assert delta_rs.version() == 1
    arrow = delta_rs.to_pyarrow_table()
    assert sorted(arrow.column("id").to_pylist()) == list(range(15))
    assert set(arrow.column("payload").to_pylist()) == {f"payload-{i}" for i in range(15)}
