"""Idempotent Delta writes from foreachBatch: the exactly-once half of every stream.

Spark replays a micro-batch whose commit it did not record (a crash, a kill -9). Every
write of a batch is therefore marked with the writer's app id (one per query and
checkpoint) and the batch id, and a table that already holds a batch's mark is not written
again. Together with batch contents that are a pure function of the batch, a replay writes
nothing twice.

How a batch is written: a table on this machine's disk (the local stack, the tests) is
appended to by delta-rs from the batch's rows as Arrow, in the driver: one Spark job
collects the rows, then the commit is a Parquet file and a log entry written without any
further Spark job (a small append costs tens of times less this way than through Spark's
Delta writer: docs/performance.md, decisions). delta-rs commits with an atomic no-replace
rename and retries on a conflict, so the compactor (streams/writes/compactor.py, also delta-rs)
and these appends may commit side by side. A table on an S3 API (s3a://) is written by
delta-rs too, which commits there with a conditional PUT (If-None-Match: *), atomic as the
rename; endpoint and credentials come from the AWS_* environment variables. A table on any
other Hadoop file system is written by Spark's Delta writer.

Why not just Delta's `txnAppId`/`txnVersion` writer options: open-source Delta answers
"has this version been written?" from `snapshot.setTransactions`, which rebuilds the
table's whole state with Spark jobs on every write (OptimisticTransaction.txnVersion ->
Snapshot.computedState; the copy Delta keeps in the .crc file is written, never read
there): a tiny append with the options costs several times one without. So:

- each write carries the mark in the commit's `userMetadata` (JSON: app id, batch id, and
  whatever else the writer records there: a landing commit's coverage of the ingress,
  streams/ingest/landing_coverage.py);
- a `BatchLedger` remembers, per table, the last batch it wrote in this process: a write
  is skipped when its batch is not newer (batches of one query are written in order);
- the first write to a table in a process reads the table's history once to learn the
  last batch of this app id. Newest commit first, it stops at the first txcoord mark: ours
  gives the batch; another app id's means this one has written nothing since (one query
  writes a table at a time). When no mark is found at all (a fresh checkpoint, a table
  written before marks existed, or one whose marked commit files are gone), the write first
  asks the table whether Delta's own record (`txnAppId`/`txnVersion`, an app transaction in
  delta-rs) already holds the batch; a local table's every write keeps that record, a
  remote table's only such a write (Spark's check is the expensive one above).

The mark lives in the commit files, which Delta deletes after `delta.logRetentionDuration`
(`streams.log_retention`, an hour by default: delta_tables/log_retention.py). A local
table's every write therefore also records its batch as a Delta app transaction, which
lives in the table's state (its checkpoints) for as long as the table: when the history
holds no mark any more, that record says whether a replayed batch is already there.

The app id is generated once per checkpoint and stored inside it. Reusing an app id with a
fresh checkpoint would restart batch ids at 0 and make every new write look "already
done"; a new checkpoint therefore always gets a new app id.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pyarrow as pa
from delta.tables import DeltaTable
from deltalake import CommitProperties, PostCommitHookProperties, Transaction, write_deltalake
from deltalake import DeltaTable as RustDeltaTable
from deltalake.exceptions import CommitFailedError
from pyspark.sql import DataFrame, SparkSession

from coordinator.core.config import StreamsConfig
from coordinator.protocol.deliveries import delta_rs_location
from delta_tables.table import TableSpec, delta_rs_uri
from streams.checkpoint.checkpoint_files import files_of
from streams.writes.writer_fence import FENCE_APP_ID, WriterFence

log = logging.getLogger(__name__)

APP_ID_FILE = "_txcoord_app_id"
#: A local append cleans the table's expired log files up only once in this many (and at
#: its first in a process): as often as a table gets a checkpoint (delta.checkpointInterval,
#: delta_tables/table.py), which is when Delta's own writer cleans up, and what cleanup
#: needs before it can delete anything.
CLEANUP_EVERY = 100
#: A local table is kept open between appends, and opened afresh once in this many. A
#: delta-rs table object that commits again and again gets slower at each commit, and
#: opening it afresh now and then keeps an append's cost flat (the figures:
#: docs/performance.md, decisions; bench/delta_append_cost.py). At a batch a second, a table
#: kept open for an hour would spend most of the batch in its own commits. An opening reads
#: the newest checkpoint (one in delta.checkpointInterval = 100 commits) and the commits after
#: it.
REOPEN_EVERY = 100


def checkpoint_path(spark: SparkSession, checkpoint: str, name: str) -> tuple[Any, Any]:
    """Return (Hadoop path, its FileSystem) of `name` inside `checkpoint` (local, s3a, ...)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/{name}")
    return path, path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def checkpoint_app_id(spark: SparkSession, checkpoint: str, name: str) -> str:
    """Return the app id stored in `checkpoint`, creating it (a new uuid) the first time."""
    files = files_of(checkpoint, spark)
    found = files.text(APP_ID_FILE)
    if found is not None:
        return found.strip()
    app_id = f"txcoord-{name}-{uuid.uuid4()}"
    files.write_new(APP_ID_FILE, app_id)
    return app_id


#: The `userMetadata` key that marks a commit as txcoord's, with the writer's app id.
MARK_APP_ID = "txcoord_app_id"
MARK_BATCH_ID = "txcoord_batch_id"
#: History pages read, newest first, when a table's last batch is not yet known.
HISTORY_PAGES = (100, 10_000, None)


def batch_mark(app_id: str, batch_id: int, extra: Mapping[str, Any] | None = None) -> str:
    """Return the `userMetadata` of a commit that writes `batch_id` for `app_id`, with the
    writer's `extra` keys beside the mark (a landing commit's coverage, say)."""
    return json.dumps(
        {**(extra or {}), MARK_APP_ID: app_id, MARK_BATCH_ID: batch_id}, separators=(",", ":")
    )


def _mark_of(user_metadata: str | None) -> dict[str, Any] | None:
    """Return a txcoord commit's `userMetadata` as JSON, else None."""
    if not user_metadata or MARK_APP_ID not in user_metadata:
        return None
    try:
        raw = json.loads(user_metadata)
        str(raw[MARK_APP_ID])
        int(raw[MARK_BATCH_ID])
    except (ValueError, TypeError, KeyError):
        return None  # someone else's metadata that merely mentions the key
    return raw if isinstance(raw, dict) else None


def read_mark(user_metadata: str | None) -> tuple[str, int] | None:
    """Return (app id, batch id) of a txcoord commit's `userMetadata`, else None."""
    raw = _mark_of(user_metadata)
    return None if raw is None else (str(raw[MARK_APP_ID]), int(raw[MARK_BATCH_ID]))


def newest_mark(spark: SparkSession, location: str) -> dict[str, Any] | None:
    """Return the `userMetadata` (as JSON) of the table's newest commit that carries a
    txcoord mark, or None when its history holds none (or there is no table yet).

    Commits without a mark (the compactor's, the writer fence's) are looked past. The
    history is read with delta-rs (no JVM: nothing for Spark to load or compile before a
    stream's first batch), or with Spark where delta-rs cannot read the table.
    """
    try:
        table = RustDeltaTable(delta_rs_location(location))
    except Exception:  # no table at all, or one only Spark can read: Spark says which
        if not DeltaTable.isDeltaTable(spark, location):
            return None
        spark_table = DeltaTable.forPath(spark, location)

        def page_of(limit: int | None) -> list[str | None]:
            history = spark_table.history(limit) if limit is not None else spark_table.history()
            return [row.userMetadata for row in history.select("userMetadata").collect()]

    else:

        def page_of(limit: int | None) -> list[str | None]:
            return [commit.get("userMetadata") for commit in table.history(limit)]

    for page in HISTORY_PAGES:
        metadata = page_of(page)  # newest first
        for user_metadata in metadata:
            if (mark := _mark_of(user_metadata)) is not None:
                return mark
        if page is None or len(metadata) < page:
            return None
    return None


def _last_batch(mark: Mapping[str, Any] | None, app_id: str) -> int | None:
    """Return the batch of `app_id` a table's newest mark says it wrote last (-1: none since
    another app's), None without a mark."""
    if mark is None:
        return None
    return int(mark[MARK_BATCH_ID]) if str(mark[MARK_APP_ID]) == app_id else -1


def last_marked_batch(spark: SparkSession, location: str, app_id: str) -> int | None:
    """Return the last batch `app_id` wrote to the table (-1: none since another app's), or
    None when the table's history holds no txcoord mark at all (or there is no table yet)."""
    return _last_batch(newest_mark(spark, location), app_id)


class BatchLedger:
    """Writes each micro-batch of one app id to each Delta table at most once.

    With a `fence` (streams/writes/writer_fence.py), every local commit also carries the writer's
    epoch, and a table that has seen a newer one refuses the write (WriterFencedError).
    """

    def __init__(self, app_id: str, fence: WriterFence | None = None) -> None:
        self.app_id = app_id
        self.fence = fence
        self._last: dict[str, int | None] = {}  # location -> last batch written (None: unknown)
        self._local: dict[str, RustDeltaTable] = {}  # location -> the local table, kept open
        self._appends: dict[str, int] = {}  # location -> local appends by this ledger
        self._noted: tuple[int, Mapping[str, Any]] | None = None  # `note`

    def note(self, batch_id: int, metadata: Mapping[str, Any]) -> None:
        """Carry `metadata` in every commit of batch `batch_id` (beside each write's own)."""
        self._noted = (batch_id, metadata)

    def prime(self, spark: SparkSession, location: str) -> None:
        """Learn the last batch this app id wrote to `location` now, not in a batch.

        The first write to a table in a process reads the table's history; a stream that
        primes its tables before it starts keeps that cost out of its first batches.
        """
        self.learn_mark(spark, location)

    def learn_mark(self, spark: SparkSession, location: str) -> dict[str, Any] | None:
        """`prime` the ledger for `location`; return the table's newest mark (`newest_mark`),
        which the history read found."""
        mark = newest_mark(spark, location)
        self._last[location] = _last_batch(mark, self.app_id)
        return mark

    def append(
        self,
        frame: DataFrame | pa.Table,
        location: str,
        batch_id: int,
        spark: SparkSession | None = None,
        *,
        creating: TableSpec | None = None,
        log_retention: timedelta = StreamsConfig.log_retention,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Append `frame` (Spark's, or Arrow rows of the table's schema with the session
        `spark`) unless this batch already did; return True when it wrote. The commit's
        `userMetadata` carries `metadata`'s keys beside the batch mark.

        With `creating`, a table that does not exist yet is created by this write, with that
        spec's properties (`log_retention`) and description, in the same commit as its first
        rows and batch mark (delta-rs only: creating it through Spark's Delta first cost a
        batch a Spark job per new table; docs/performance.md, "Many new topics").
        """
        if isinstance(frame, DataFrame):
            spark = frame.sparkSession
        elif spark is None:
            raise ValueError("Arrow rows are appended with the SparkSession beside them")
        if location not in self._last:
            self._last[location] = last_marked_batch(spark, location, self.app_id)
        known = self._last[location]
        if known is not None and batch_id <= known:
            log.info("batch %d is already in %s: not written again", batch_id, location)
            return False
        if self._noted is not None and self._noted[0] == batch_id:
            metadata = {**self._noted[1], **(metadata or {})}
        # Until the write is known to have landed (or not), the log is the only truth.
        del self._last[location]
        directory = delta_rs_uri(location)
        if directory is not None:
            rows = frame.toArrow() if isinstance(frame, DataFrame) else frame
            wrote = self._append_delta_rs(
                rows,
                location,
                directory,
                batch_id,
                known is None,
                creating=creating,
                log_retention=log_retention,
                metadata=metadata,
            )
        else:
            if creating is not None:
                creating.create_at(spark, location, log_retention)
            if isinstance(frame, pa.Table):
                frame = spark.createDataFrame(frame)
            wrote = self._append_spark(frame, location, batch_id, known is None, metadata)
        self._last[location] = batch_id
        return wrote

    def _append_delta_rs(
        self,
        rows: pa.Table,
        location: str,
        directory: str,
        batch_id: int,
        unmarked: bool,
        *,
        creating: TableSpec | None = None,
        log_retention: timedelta = StreamsConfig.log_retention,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Append `rows` to the table at `directory` (a local folder or an s3:// URI) with
        delta-rs; False if Delta's own record of this app id (asked only for an `unmarked`
        table) says the batch is there. A table not there yet is created by the write, as
        `creating` says if given."""
        table = self._local.get(location)
        if table is None and RustDeltaTable.is_deltatable(directory):
            table = self._local[location] = RustDeltaTable(directory)
        if table is None and self.fence is not None:
            table = self._local[location] = self._create_fenced(
                rows.schema, location, directory, creating, log_retention
            )
        if unmarked:
            done = None
            if table is not None:
                table.update_incremental()  # the table as it is now, not when it was opened
                done = table.transaction_version(self.app_id)
            if done is not None and done >= batch_id:
                log.info("batch %d is already in %s (Delta's record)", batch_id, location)
                return False
        # Every write also records its batch as a Delta app transaction: the table's state
        # (kept in its checkpoints) then knows this app id's last batch even once the
        # commit files holding the marks are gone (delta.logRetentionDuration).
        recorded = [Transaction(self.app_id, batch_id)]
        if self.fence is not None:
            if table is not None:  # the snapshot this write commits against: see the except
                self.fence.refuse_newer(table.transaction_version(FENCE_APP_ID), location)
            recorded.append(self.fence.transaction(batch_id))
        appends = self._appends[location] = self._appends.get(location, 0) + 1
        if appends % REOPEN_EVERY == 0:
            self._local.pop(location, None)  # the next write opens it afresh (REOPEN_EVERY)
        try:
            # The write reads the log's new commits itself (the compactor's, say) before it
            # commits: the table kept open needs no refresh first (each one lists the log).
            write_deltalake(
                directory if table is None else table,  # no table yet: this write creates it
                rows,
                mode="append",
                # Used only when the write creates the table.
                configuration=None if creating is None else creating.configuration(log_retention),
                description=None if creating is None else creating.description,
                commit_properties=CommitProperties(
                    custom_metadata={"userMetadata": batch_mark(self.app_id, batch_id, metadata)},
                    app_transactions=recorded,
                ),
                # delta-rs would clean the log up after every commit, listing the whole
                # folder with three stats per file: every CLEANUP_EVERY-th append does.
                post_commithook_properties=PostCommitHookProperties(
                    cleanup_expired_logs=appends % CLEANUP_EVERY == 1
                ),
            )
        except CommitFailedError:
            self._local.pop(location, None)  # opened afresh by the next write
            # A newer epoch's commit since the snapshot checked above: Delta failed this
            # one as a concurrent write of the fence's app transaction.
            if self.fence is not None and RustDeltaTable.is_deltatable(directory):
                now = RustDeltaTable(directory).transaction_version(FENCE_APP_ID)
                self.fence.refuse_newer(now, location)
            raise
        except Exception:
            self._local.pop(location, None)  # opened afresh by the next write
            raise
        return True

    def _create_fenced(
        self,
        schema: pa.Schema,
        location: str,
        directory: str,
        creating: TableSpec | None,
        log_retention: timedelta,
    ) -> RustDeltaTable:
        """Create the table at `directory` empty, with this writer's epoch on it, then make
        sure no newer writer has claimed the warehouse: only then may rows go in.

        A table created after a newer coordinator started (its first topic's first delivery)
        was not among the tables that one fenced at its start, so the older writer's rows
        would land there unfenced, numbered from offsets the newer one never read (issue 60,
        item 5). In this order no row can: a newer claim before the check below is seen by
        it; a newer claim after it lists the warehouse after this table exists, fences it,
        and Delta then refuses the older writer's append.
        """
        assert self.fence is not None
        write_deltalake(
            directory,
            schema.empty_table(),
            mode="append",
            configuration=None if creating is None else creating.configuration(log_retention),
            description=None if creating is None else creating.description,
            commit_properties=CommitProperties(app_transactions=[self.fence.transaction(None)]),
        )
        self.fence.notice()
        table = RustDeltaTable(directory)
        self.fence.refuse_newer(table.transaction_version(FENCE_APP_ID), location)
        return table

    def _append_spark(
        self,
        frame: DataFrame,
        location: str,
        batch_id: int,
        unmarked: bool,
        metadata: Mapping[str, Any] | None = None,
    ) -> bool:
        """Append `frame` with Spark's Delta writer; False if Delta skipped it as written."""
        writer = (
            frame.write.format("delta")
            .mode("append")
            .option("userMetadata", batch_mark(self.app_id, batch_id, metadata))
        )
        if unmarked:  # no mark to go by: Delta checks (and records) the batch itself
            writer = writer.option("txnAppId", self.app_id).option("txnVersion", batch_id)
        writer.save(location)
        if unmarked:  # Delta may have skipped it: our mark in the log says whether not
            return last_marked_batch(frame.sparkSession, location, self.app_id) == batch_id
        return True
