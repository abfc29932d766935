"""Compaction of the output tables' small files, off the coordinator's batch path.

Every micro-batch that decides something appends one small file to each table it writes.
Delta's auto compaction would fold them after each commit, but it first scans the table's
file list for small files: a Spark job on the coordinator's path that more than doubled the
cost of a small append (turned off in coordinator/runtime/spark_session.py). This thread
does the folding instead, every `streams.compact_interval`: a table with `MIN_FILES` files or
more gets an OPTIMIZE (delta-rs's on this machine's disk or an S3 API: its commits, like the
batches' delta-rs appends, take their version with an atomic no-replace rename or a
conditional PUT; Spark's elsewhere). OPTIMIZE only
rewrites files (no data change), so appends made meanwhile do not conflict with it, and
readers see the same rows before and after.

Every table is compacted, the landed input (`system/half_messages`, `system/op_records`) too:
left alone it gained a file per batch for ever, and every file a table holds makes each
delta-rs append dearer (docs/performance.md, "What bounds it"; bench/delta_append_cost.py
--files). A Delta stream reader of those tables (a notebook, a downstream job) skips the
compaction's commits (dataChange = false) and reads every row once.

A fenced coordinator compacts nothing (contract 7.10): before each table the compactor asks
the writer fence whether a newer coordinator has claimed the warehouse, and whether the
table carries a newer epoch; once fenced, it stops. Its commits do not carry the fence's app
transaction themselves: they would then conflict with the batch appends of the same epoch
(Delta fails a commit whose app transaction a concurrent one also set), and a batch would
fail for a compaction. So one window remains, a newer claim between that check and the
OPTIMIZE's commit: a commit that changes no data (docs/deployment.md).
"""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from deltalake import DeltaTable as RustDeltaTable
from pyspark.sql import SparkSession

from coordinator.core.errors import WriterFencedError
from delta_tables.registry import warehouse_tables
from delta_tables.table import delta_rs_uri, table_path
from streams.writes.writer_fence import FENCE_APP_ID, WriterFence

log = logging.getLogger(__name__)

#: Files a table needs before it is compacted (Delta's autoCompact.minNumFiles).
MIN_FILES = 50
#: How long a stop waits for an OPTIMIZE in flight.
STOP_WAIT_SECONDS = 120.0

__all__ = ["MIN_FILES", "Compactor"]


class Compactor:
    """Compact the warehouse's output tables now and then, in a thread of its own."""

    def __init__(
        self,
        spark: SparkSession,
        warehouse: str,
        interval: timedelta,
        min_files: int = MIN_FILES,
        fence: WriterFence | None = None,
    ) -> None:
        self.spark, self.warehouse = spark, warehouse
        self.interval, self.min_files = interval, min_files
        self.fence = fence  # the coordinator's writer epoch: fenced, it compacts nothing
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tables(self) -> list[str]:
        """Return the tables this compactor may compact."""
        return warehouse_tables(self.warehouse)

    def files(self, name: str) -> int:
        """Return the number of files of the newest version of table `name`."""
        location = table_path(self.warehouse, name)
        directory = delta_rs_uri(location)
        if directory is not None:
            return len(RustDeltaTable(directory).file_uris())
        detail = self.spark.sql(f"DESCRIBE DETAIL delta.`{location}`").first()
        return int(detail["numFiles"]) if detail is not None else 0

    def compact(self, name: str) -> None:
        """Fold table `name`'s small files: with delta-rs where the batches append with it
        (streams/writes/delta_writes.py: local disk, an S3 API, where its commit is a conditional
        PUT and Spark's is not), else with Spark's OPTIMIZE."""
        location = table_path(self.warehouse, name)
        directory = delta_rs_uri(location)
        if self.fence is not None:
            self.fence.notice()  # a newer claim: stop before this table
        if directory is not None:
            table = RustDeltaTable(directory)
            if self.fence is not None:  # the snapshot this OPTIMIZE commits against
                self.fence.refuse_newer(table.transaction_version(FENCE_APP_ID), location)
            table.optimize.compact()
        else:
            self.spark.sql(f"OPTIMIZE delta.`{location}`").collect()

    def compact_once(self) -> list[str]:
        """Compact every table with `min_files` files or more; return their names."""
        compacted = []
        for name in self.tables():
            if self._stop.is_set():
                break
            before = self.files(name)
            if before < self.min_files:
                continue
            self.compact(name)
            log.info("compacted %s: %d files -> %d", name, before, self.files(name))
            compacted.append(name)
        return compacted

    def start(self) -> Compactor:
        """Start compacting every `interval` (not at all for an interval of 0)."""
        if self.interval > timedelta(0):
            self._thread = threading.Thread(target=self._run, name="txcoord-compactor", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval.total_seconds()):
            try:
                self.compact_once()
            except WriterFencedError as exc:  # a newer coordinator writes now: never again
                log.warning("compaction stops: %s", exc)
                return
            except Exception as exc:  # the next round tries again; nothing was changed
                if not self._stop.is_set():
                    log.warning("compaction failed, tried again in %s: %s", self.interval, exc)

    def stop(self) -> None:
        """Stop, letting an OPTIMIZE in flight finish (up to `STOP_WAIT_SECONDS`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_SECONDS)
            self._thread = None
