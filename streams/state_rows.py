"""How many rows the coordinator's stateful stage keeps, counted by the stage itself.

Spark's own count (`numRowsTotal` of a RocksDB state store) costs a read of every key before
it is written or removed, to learn whether it was there: 7% of the Spark JVM's CPU in the
bench (README "Performance"). The engine turns it off
(`spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows`) and the stage, which
knows when it keeps a new transaction and when it lets one go, reports each task's net
change to a Spark accumulator (streams/jvm/txcoord/StateRowDeltas.java). The writer adds
each batch's change once, after the batch's rows are in (`advance`), to the count the
checkpoint held when the query started (`seed`, read with Spark's state data source).

The count is the gauge `txcoord_state_rows` and the progress log's `state_rows` (summary in
streams/progress.py looks it up by query name).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from pyspark.sql import SparkSession

from streams.delta_writes import checkpoint_has_commits

log = logging.getLogger(__name__)

#: The stage's state variable (streams/jvm/txcoord/TransactionProcessor.java).
STATE_VARIABLE = "transaction"

_lock = threading.Lock()
_counts: dict[str, StateRowCount] = {}


class StateRowCount:
    """The rows a query's stage keeps: the checkpoint's count at start, plus each batch's."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark._jvm
        assert jvm is not None, "a classic (non-Connect) Spark session is needed"
        #: What the stage reports to (txcoord.StateRowDeltas), registered with the context.
        self.deltas: Any = jvm.txcoord.StateRowDeltas()
        spark.sparkContext._jsc.sc().register(self.deltas, "txcoord state rows")
        self._lock = threading.Lock()
        self._rows: int | None = None  # unknown until seeded
        self._last_batch = -1

    def seed(self, spark: SparkSession, checkpoint: str) -> None:
        """Start from the rows the stage kept at `checkpoint`'s last committed batch.

        A checkpoint whose state cannot be read leaves the count unknown (the gauge is then
        absent): a figure must never stop the engine.
        """
        rows = 0
        try:
            if checkpoint_has_commits(spark, checkpoint):
                reader = spark.read.format("statestore").option("stateVarName", STATE_VARIABLE)
                rows = reader.load(checkpoint).count()
        except Exception:
            log.warning("the stage's state rows could not be counted at start: no "
                        "txcoord_state_rows for this run", exc_info=True)  # fmt: skip
            return
        with self._lock:
            self._rows = rows
        log.info("the coordinator's stage keeps %d state row(s) at start", rows)

    def advance(self, batch_id: int) -> None:
        """Add batch `batch_id`'s change (its stage has run), once however often it runs."""
        change = int(self.deltas.take(batch_id))
        with self._lock:
            if batch_id > self._last_batch and self._rows is not None:
                self._rows += change
                self._last_batch = batch_id

    @property
    def rows(self) -> int | None:
        """Return the rows the stage keeps now (None until seeded)."""
        with self._lock:
            return self._rows


def register(query: str, count: StateRowCount) -> None:
    """Make `count` the state rows reported for query `query`."""
    with _lock:
        _counts[query] = count


def counted(query: str | None) -> StateRowCount | None:
    """Return the count of query `query`'s state rows, None if its stage counts none."""
    with _lock:
        return _counts.get(query) if query is not None else None
