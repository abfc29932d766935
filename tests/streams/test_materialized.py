"""streams/materialized.py on a real SparkSession: computed once, read as often, released."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streams.materialized import materialized


def stored_rdds(spark: SparkSession) -> int:
    return spark.sparkContext._jsc.sc().getPersistentRDDs().size()  # type: ignore[union-attr]


def test_rows_are_computed_once_and_read_in_the_partitions_asked(spark: SparkSession) -> None:
    # rand() gives other values each time it is computed: equal reads prove one computation.
    frame = spark.range(0, 1000, numPartitions=7).select("id", F.rand().alias("draw"))
    before = stored_rdds(spark)
    with materialized(frame, 2) as rows:
        assert rows.rdd.getNumPartitions() == 2
        first = sorted(rows.collect())
        again = sorted(rows.where(F.col("id") >= 0).collect())
        assert first == again
        assert [row.id for row in first] == list(range(1000))
        assert stored_rdds(spark) == before + 1
    assert stored_rdds(spark) == before


def test_the_rows_are_released_when_the_block_raises(spark: SparkSession) -> None:
    before = stored_rdds(spark)
    with (
        pytest.raises(RuntimeError, match="a write failed"),
        materialized(spark.range(10), 1) as rows,
    ):
        assert rows.count() == 10
        raise RuntimeError("a write failed")
    assert stored_rdds(spark) == before


def test_partitions_must_be_positive(spark: SparkSession) -> None:
    with (
        pytest.raises(ValueError, match="partitions must be >= 1"),
        materialized(spark.range(1), 0),
    ):
        pass


def test_releasing_the_rows_logs_nothing(tmp_path: Path) -> None:
    """Spark warns at each release of checkpointed rows; txcoord's driver log config drops it.

    A fresh driver (its own JVM, txcoord's log configuration), as the engine runs.
    """
    script = (
        "from coordinator.spark_session import build_spark_session, SparkSettings\n"
        "from streams.materialized import materialized\n"
        f"spark = build_spark_session(SparkSettings(warehouse={str(tmp_path)!r}))\n"
        "with materialized(spark.range(100), 2) as rows:\n"
        "    print('rows', rows.count())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
        cwd=Path(__file__).resolve().parents[2], check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rows 100" in done.stdout
    assert "locally checkpointed" not in done.stderr, done.stderr[-3000:]
