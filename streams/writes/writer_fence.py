"""One writer per warehouse: a writer epoch claimed at start and checked inside every commit.

Exactly-once rests on one coordinator writing a warehouse at a time. Spark's checkpoint log
stops a second query on the same checkpoint only once both planned the same batch (and only
where a rename is atomic); nothing stops a coordinator started on another checkpoint, or a
stale driver on a lost node, from appending to the tables. So, as Kafka fences a zombie
producer by its epoch (contract 7.10):

- **Claim.** Each start claims the next epoch in `system/writers` (delta_tables/writers.py): a
  row appended in a Delta commit that also records the epoch as an app transaction
  (`CLAIM_APP_ID`). Two starts that read the same last epoch both try to commit that app
  transaction; Delta lets one commit and fails the other (a concurrent app transaction), which
  then claims the next. Epochs are therefore unique and ordered by start.
- **Fence.** Every write of the coordinator records `FENCE_APP_ID` = (epoch, batch) as an app
  transaction in the same commit as its rows, after checking that the table has seen no newer
  epoch. The check and the commit are one step: a newer epoch's commit landing between them
  is a concurrent write of the same app transaction, and Delta fails ours. At start, before its
  first batch, a coordinator puts its epoch on every table of the warehouse (an empty commit
  each), so that from then on no older writer can commit anywhere.
- **Notice.** Each batch first compares its epoch with the newest claim: a fenced coordinator
  stops at its next batch rather than at its next write to a fenced table, and says who took
  over (the newer claim's row: host, pid, when).

A write that meets a newer epoch raises WriterFencedError, which stops the query and the
process (exit code 3: a supervisor should not restart it; a restart would claim a newer
epoch and fence the coordinator that took over).

The check inside the commit holds for every table delta-rs writes: a local warehouse, and
one on an S3 API (`s3a://`), where delta-rs commits with a conditional PUT. A warehouse on any
other Hadoop file system is written by Spark's Delta writer, whose commit cannot carry a
second app transaction: there a fenced coordinator is stopped by the per-batch notice, and
writes of the batch in flight when the newer one started can still land.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
from deltalake import CommitProperties, Transaction, write_deltalake
from deltalake import DeltaTable as RustDeltaTable
from deltalake.exceptions import CommitFailedError
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from coordinator.core.backoff import Backoff
from coordinator.core.errors import WriterFencedError
from delta_tables import writers
from delta_tables.table import delta_rs_uri
from streams.writes.arrow_rows import arrow_schema

log = logging.getLogger(__name__)

#: The app transaction every write of a fenced writer carries: (epoch << EPOCH_SHIFT) | slot.
FENCE_APP_ID = "txcoord-writer-epoch"
#: The app transaction of `system/writers` that makes each epoch's claim unique.
CLAIM_APP_ID = "txcoord-writer-claim"
#: Versions of the fence: the epoch in the high bits, the batch (+1; 0: the start's fence) below.
EPOCH_SHIFT = 32
#: How long a claim (or a start's fence of one table) keeps trying while other starts win the
#: same commit. A count of attempts was not a bound on contention: with six starts side by
#: side, one claim lost up to 19 times in a row on an idle host (it retried at once, and the
#: starts that had just won were faster to read the next epoch), and 20 attempts ran out on
#: a loaded one. So the losers back off with jitter, and give up only after this long.
CLAIM_PATIENCE_S = 120.0
#: The first and the longest pause between two attempts (equal jitter: coordinator.core.backoff).
CLAIM_BACKOFF_S = (0.005, 1.0)
#: Tables fenced side by side at start (each an open of the table and one small commit).
FENCE_THREADS = 8


def epoch_of(version: int | None) -> int:
    """Return the epoch of a fence version read from a table (0: never fenced)."""
    return 0 if version is None else version >> EPOCH_SHIFT


@dataclass(frozen=True)
class Claim:
    """One row of `system/writers`: who claimed an epoch, and when."""

    epoch: int
    app_id: str
    checkpoint: str
    host: str
    pid: int
    claim_id: str
    started_at: datetime

    def describe(self) -> str:
        """Return the claim as an operator reads it."""
        started = self.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return (
            f"epoch {self.epoch}, started {started} on {self.host} (pid {self.pid}), "
            f"checkpoint {self.checkpoint}"
        )


class WriterFence:
    """The epoch one coordinator writes with, and the checks that keep older ones out."""

    def __init__(self, spark: SparkSession, warehouse: str, claim: Claim) -> None:
        self.spark = spark
        self.warehouse = warehouse
        self.claim = claim
        self._claims: RustDeltaTable | None = None

    @property
    def epoch(self) -> int:
        """Return this writer's epoch."""
        return self.claim.epoch

    def version(self, batch_id: int | None) -> int:
        """Return the fence version a write of `batch_id` records (None: the start's fence)."""
        return (self.epoch << EPOCH_SHIFT) | (0 if batch_id is None else batch_id + 1)

    def transaction(self, batch_id: int | None) -> Transaction:
        """Return the app transaction a commit of `batch_id` carries."""
        return Transaction(FENCE_APP_ID, self.version(batch_id))

    def refuse_newer(self, version: int | None, location: str) -> None:
        """Raise WriterFencedError when a table's fence `version` is of a newer epoch."""
        if epoch_of(version) > self.epoch:
            raise self._fenced(epoch_of(version), f"table {location}")

    def notice(self) -> None:
        """Raise WriterFencedError when a newer epoch has been claimed (once per batch)."""
        newest = self._newest_epoch()
        if newest > self.epoch:
            raise self._fenced(newest, "system/writers")

    def fence_table(self, location: str) -> None:
        """Put this epoch on the table at `location` (an empty commit): no older writer can
        commit there any more. A table only Spark writes is left to the per-batch notice."""
        uri = delta_rs_uri(location)
        if uri is None:
            return
        for _ in attempts():
            table = RustDeltaTable(uri)
            self.refuse_newer(table.transaction_version(FENCE_APP_ID), location)
            try:
                table.create_write_transaction(
                    actions=[],
                    mode="append",
                    schema=table.schema(),
                    partition_by=table.metadata().partition_columns or None,
                    commit_properties=CommitProperties(app_transactions=[self.transaction(None)]),
                )
                return
            except CommitFailedError:  # an older writer's commit in between: look again
                continue
        raise WriterFencedError(
            f"could not put writer epoch {self.epoch} on {location} in {CLAIM_PATIENCE_S:.0f} s: "
            "other writers kept committing there first"
        )

    def fence_tables(self, locations: list[str]) -> None:
        """Put this epoch on every table at `locations`, a few side by side."""
        with ThreadPoolExecutor(FENCE_THREADS, thread_name_prefix="fence") as pool:
            list(pool.map(self.fence_table, locations))  # raises the first failure

    def _newest_epoch(self) -> int:
        location = writers.TABLE.path(self.warehouse)
        uri = delta_rs_uri(location)
        if uri is None:
            found = self.spark.read.format("delta").load(location).agg(F.max("epoch")).first()
            return int(found[0] or 0) if found is not None else 0
        if self._claims is None:
            self._claims = RustDeltaTable(uri)
        else:
            self._claims.update_incremental()
        return self._claims.transaction_version(CLAIM_APP_ID) or 0

    def _fenced(self, newer: int, where: str) -> WriterFencedError:
        claim = claim_of(self.spark, self.warehouse, newer)
        who = claim.describe() if claim is not None else f"epoch {newer}"
        return WriterFencedError(
            f"this coordinator (writer epoch {self.epoch}) is fenced: a newer coordinator "
            f"({who}) has taken over the warehouse {self.warehouse} (seen on {where}); "
            "it alone writes there now. This one stops without writing; do not restart it "
            "unless the newer one is gone (a restart claims a newer epoch and fences that one)."
        )


def claim_epoch(spark: SparkSession, warehouse: str, app_id: str, checkpoint: str) -> WriterFence:
    """Claim the next writer epoch of `warehouse`; return it."""
    location = writers.TABLE.path(warehouse)
    uri = delta_rs_uri(location)
    if uri is None or not RustDeltaTable.is_deltatable(uri):
        writers.TABLE.create_if_absent(spark, warehouse)
    for _ in attempts():
        claim = Claim(
            epoch=0,
            app_id=app_id,
            checkpoint=checkpoint,
            host=socket.gethostname(),
            pid=os.getpid(),
            claim_id=str(uuid.uuid4()),
            started_at=datetime.now(UTC),
        )
        if uri is not None:
            table = RustDeltaTable(uri)
            epoch = (table.transaction_version(CLAIM_APP_ID) or 0) + 1
            claim = _with_epoch(claim, epoch)
            try:
                write_deltalake(
                    table,
                    _rows(claim),
                    mode="append",
                    commit_properties=CommitProperties(
                        app_transactions=[Transaction(CLAIM_APP_ID, epoch)]
                    ),
                )
            except CommitFailedError:  # another start claimed this epoch first
                continue
        else:
            found = spark.read.format("delta").load(location).agg(F.max("epoch")).first()
            claim = _with_epoch(claim, int(found[0] or 0) + 1 if found is not None else 1)
            try:
                # Delta skips (or fails) a second write of the same app transaction version.
                spark.createDataFrame(_rows(claim)).write.format("delta").mode("append").option(
                    "txnAppId", CLAIM_APP_ID
                ).option("txnVersion", claim.epoch).save(location)
            except Exception as exc:  # a concurrent claim's commit: Delta's own exception
                if "Concurrent" not in str(exc):
                    raise
                continue
            if (mine := claim_of(spark, warehouse, claim.epoch)) is None or (
                mine.claim_id != claim.claim_id
            ):
                continue
        log.info("writer epoch %d claimed for %s", claim.epoch, app_id)
        return WriterFence(spark, warehouse, claim)
    raise WriterFencedError(
        f"could not claim a writer epoch in {location} in {CLAIM_PATIENCE_S:.0f} s: "
        "other coordinators kept starting against this warehouse"
    )


def attempts(patience: float | None = None) -> Iterator[int]:
    """Yield 0, 1, 2, ...: the first at once, each later one after a jittered pause, until
    `patience` seconds (default CLAIM_PATIENCE_S) have passed."""
    deadline = time.monotonic() + (CLAIM_PATIENCE_S if patience is None else patience)
    backoff = Backoff(*CLAIM_BACKOFF_S)
    attempt = 0
    while True:
        yield attempt
        attempt += 1
        pause = backoff.next_delay()
        if time.monotonic() + pause > deadline:
            return
        time.sleep(pause)


def claim_of(spark: SparkSession, warehouse: str, epoch: int) -> Claim | None:
    """Return the row of `system/writers` that claimed `epoch`, if any."""
    location = writers.TABLE.path(warehouse)
    uri = delta_rs_uri(location)
    if uri is not None:
        table = RustDeltaTable(uri)
        rows = table.to_pyarrow_table(filters=[("epoch", "=", epoch)]).to_pylist()
    else:
        found = spark.read.format("delta").load(location).where(F.col("epoch") == epoch)
        rows = [row.asDict() for row in found.collect()]
    if not rows:
        return None
    return Claim(**{name: rows[0][name] for name in writers.SCHEMA.fieldNames()})


def _with_epoch(claim: Claim, epoch: int) -> Claim:
    return Claim(**{**claim.__dict__, "epoch": epoch})


def _rows(claim: Claim) -> pa.Table:
    return pa.Table.from_pylist([claim.__dict__], schema=arrow_schema(writers.SCHEMA))
