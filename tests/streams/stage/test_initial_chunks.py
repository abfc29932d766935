"""The initial state of a rebuild crosses in chunks (streams/stage/processor.py
initial_chunks): each chunk must reach the task whose state store will hold its members.

Spark routes a key to a stateful partition by hash partitioning on the grouping columns; a
chunk is routed by its representative's key. This holds the chunks to Spark's own routing
(a repartition by the same columns), not to the formula the chunks were made with.
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streams.stage.processor import CHUNKS_PER_PARTITION, KEY, initial_chunks

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_every_transaction_is_in_one_chunk_routed_where_spark_routes_it(
    spark: SparkSession, partitions: int
) -> None:
    rows = [(f"g{i % 7}", f"tx-{i}", "PREPARED", 1_000 + i) for i in range(3_000)]
    initial = spark.createDataFrame(
        rows, "producer_group string, transaction_id string, state string, timer_ms long"
    )
    routed = {
        (r.producer_group, r.transaction_id): r.p
        for r in initial.repartition(partitions, *KEY)
        .select(*KEY, F.spark_partition_id().alias("p"))
        .collect()
    }
    seen: list[tuple[str, str]] = []
    chunks = initial_chunks(initial, partitions).collect()
    for chunk in chunks:
        document = json.loads(bytes(chunk["chunk"]))
        members = [(m["producer_group"], m["transaction_id"]) for m in document["states"]]
        representative = (chunk["producer_group"], chunk["transaction_id"])
        assert representative in members
        assert {routed[m] for m in members} == {document["partition"]}, members
        assert routed[representative] == document["partition"]
        for member in document["states"]:
            assert member["state"]["timer_ms"] == 1_000 + int(member["transaction_id"][3:])
        seen += members
    assert sorted(seen) == sorted((g, t) for g, t, _, _ in rows)
    # Chunks, not a key each (one partition: at most 1,024 keys for 3,000 transactions).
    assert len(chunks) <= partitions * CHUNKS_PER_PARTITION
