"""`system/queue_offsets`: each queue's next offset, read by delta-rs or else by Spark.

Real Delta tables on disk, appended in several commits as the coordinator appends them
(one row per queue a batch moved). The next offset of a queue is its largest row, whichever
reader reads it; a numbering that read a smaller one would hand out an offset twice.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from delta_tables import queue_offsets
from delta_tables.registry import create_system_tables

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("form", ["path", "hadoop-uri"])
def test_each_queue_reads_its_largest_next_offset(
    spark: SparkSession, tmp_path: Path, rng: random.Random, form: str
) -> None:
    # delta-rs reads a plain path; Hadoop's `file:/path` form it takes for a relative path,
    # and Spark reads the table instead.
    warehouse = str(tmp_path / "w") if form == "path" else f"file:{tmp_path / 'w'}"
    create_system_tables(spark, warehouse)
    assert queue_offsets.read(spark, warehouse) == {}
    queues = [("Orders", 0), ("Orders", 1), ("Payments", 0)]
    expected: dict[tuple[str, int], int] = {}
    for batch in range(4):
        moved = rng.sample(queues, rng.randint(1, len(queues)))
        rows = []
        for queue in moved:
            expected[queue] = expected.get(queue, 0) + rng.randint(1, 50)
            rows.append((*queue, expected[queue], batch))
        spark.createDataFrame(rows, queue_offsets.SCHEMA).write.format("delta").mode("append").save(
            queue_offsets.TABLE.path(warehouse)
        )
    assert queue_offsets.read(spark, warehouse) == expected
