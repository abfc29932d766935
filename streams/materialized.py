"""A micro-batch's rows, computed once and kept as plain rows while the batch is written.

The coordinator's foreachBatch writes one batch to several tables, each write a Spark job
over the same rows. Those rows come out of the stateful stage, which must run once per
batch, and out of the parse of the Kafka records; every job over them must read what was
computed, not compute it again. `DataFrame.persist()` does that with Spark's columnar cache,
which encodes (and compresses) every column of every row into column buffers and decodes
them again for each job: for the coordinator's wide rows that was the largest share of the
executors' work in a loaded batch (a JFR profile of the capacity burst). A local checkpoint
keeps the rows as they are, in the block manager (memory, spilling to disk), and gives a
frame whose plan is a plain scan of them.

Every job over the rows then runs one task per core rather than one per partition of the
computation (the stage's partitions and every Kafka partition of the landing side): a task
deserializes its closure and generates its projections' code, a fixed cost per task that a
small write paid many times over.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from pyspark.sql import DataFrame


@contextlib.contextmanager
def materialized(frame: DataFrame, partitions: int | None = None) -> Iterator[DataFrame]:
    """Compute `frame` once; yield its rows in `partitions` partitions (default: one per
    core); release them after, whatever the block raises."""
    count = frame.sparkSession.sparkContext.defaultParallelism if partitions is None else partitions
    if count < 1:
        raise ValueError(f"partitions must be >= 1, not {count}")
    stored = frame.localCheckpoint(eager=True)
    try:
        yield stored.coalesce(count)
    finally:
        # The plan of a checkpointed frame is the stored RDD: drop its blocks.
        stored._jdf.queryExecution().analyzed().rdd().unpersist(False)
