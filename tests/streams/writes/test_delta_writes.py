"""streams/writes/delta_writes.py: each batch lands in each table once, across replays and restarts.

Real Delta tables on disk. A "restart" is a fresh BatchLedger, which knows nothing but what
the table's log says, exactly like a new driver process after a kill -9.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RustDeltaTable
from deltalake import write_deltalake
from pyspark.sql import DataFrame, SparkSession

from delta_tables import topics
from streams.writes import delta_writes
from streams.writes.arrow_rows import arrow_schema
from streams.writes.delta_writes import (
    BatchLedger,
    batch_mark,
    checkpoint_app_id,
    last_marked_batch,
    read_mark,
)

pytestmark = pytest.mark.spark


def rows(spark: SparkSession, batch_id: int, n: int = 3) -> DataFrame:
    return spark.range(n).selectExpr("id", f"cast({batch_id} as long) as batch_id")


def batches_in(spark: SparkSession, location: Path) -> list[int]:
    """Return the batch id of every row of the table, sorted (repeats show duplicates)."""
    frame = spark.read.format("delta").load(str(location))
    return sorted(row.batch_id for row in frame.select("batch_id").collect())


def test_marks_round_trip_and_foreign_metadata_is_not_a_mark() -> None:
    assert read_mark(batch_mark("app-1", 42)) == ("app-1", 42)
    assert read_mark(None) is None
    assert read_mark("nightly backfill by alice") is None
    assert read_mark('{"txcoord_app_id": "x"}') is None  # mentions the key, no batch id
    assert read_mark('{"txcoord_app_id": "x", "txcoord_batch_id": "seven"}') is None


def test_a_writers_metadata_rides_beside_the_mark_and_is_found_past_unmarked_commits(
    spark: SparkSession, tmp_path: Path
) -> None:
    assert read_mark(batch_mark("app-1", 7, {"extra": {"a": 1}})) == ("app-1", 7)
    table = str(tmp_path / "t")
    ledger = BatchLedger("app-a")
    ledger.append(rows(spark, 0), table, 0, metadata={"extra": {"a": 1}})
    # Commits without a mark (maintenance, the compactor, the writer fence) are looked past.
    rows(spark, 99, n=1).write.format("delta").mode("append").save(table)
    RustDeltaTable(table).optimize.compact()
    found = delta_writes.newest_mark(spark, table)
    assert found is not None and found["extra"] == {"a": 1}, found
    assert BatchLedger("app-a").learn_mark(spark, table) == found
    assert delta_writes.newest_mark(spark, f"{table}-absent") is None
    # What a batch notes rides in each of its commits, beside the write's own.
    ledger.note(1, {"noted": 1})
    ledger.append(rows(spark, 1), table, 1, metadata={"extra": 2})
    ledger.append(rows(spark, 2), table, 2)
    marks = [delta_writes._mark_of(c.get("userMetadata")) for c in RustDeltaTable(table).history(2)]
    assert [(m or {}).get("noted") for m in marks] == [None, 1]
    assert [(m or {}).get("extra") for m in marks] == [None, 2]


def test_a_replayed_batch_is_written_once_in_the_same_process(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    ledger = BatchLedger("app-a")
    assert ledger.append(rows(spark, 0), str(table), 0)
    assert ledger.append(rows(spark, 1), str(table), 1)
    assert not ledger.append(rows(spark, 1), str(table), 1)  # the replay
    assert not ledger.append(rows(spark, 0), str(table), 0)
    assert batches_in(spark, table) == [0, 0, 0, 1, 1, 1]


def test_a_restarted_writer_learns_its_last_batch_from_the_log(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    first = BatchLedger("app-a")
    for batch in range(3):
        first.append(rows(spark, batch), str(table), batch)
    # A commit of someone else (maintenance, a notebook) in between changes nothing.
    rows(spark, 99, n=1).write.format("delta").mode("append").save(str(table))
    assert last_marked_batch(spark, str(table), "app-a") == 2

    restarted = BatchLedger("app-a")
    assert not restarted.append(rows(spark, 2), str(table), 2)  # replay after the crash
    assert restarted.append(rows(spark, 3), str(table), 3)
    assert batches_in(spark, table) == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3 + [99]


@pytest.mark.parametrize("form", ["path", "hadoop-uri"])
def test_the_log_is_read_by_delta_rs_or_else_by_spark(
    spark: SparkSession, tmp_path: Path, form: str
) -> None:
    # delta-rs reads a plain path; Hadoop's `file:/path` form it takes for a relative path,
    # and Spark reads the history instead. Both must find the same last batch.
    table = str(tmp_path / "t") if form == "path" else f"file:{tmp_path / 't'}"
    first = BatchLedger("app-a")
    for batch in range(2):
        first.append(rows(spark, batch), table, batch)
    assert last_marked_batch(spark, table, "app-a") == 1
    assert last_marked_batch(spark, table, "app-b") == -1
    assert last_marked_batch(spark, f"{table}-absent", "app-a") is None
    restarted = BatchLedger("app-a")
    assert not restarted.append(rows(spark, 1), table, 1)
    assert restarted.append(rows(spark, 2), table, 2)
    assert batches_in(spark, tmp_path / "t") == [0] * 3 + [1] * 3 + [2] * 3


def test_a_new_checkpoint_writes_from_batch_zero_after_another_app(
    spark: SparkSession, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    old = BatchLedger("app-old")
    for batch in range(5):
        old.append(rows(spark, batch, n=1), str(table), batch)
    assert last_marked_batch(spark, str(table), "app-new") == -1
    new = BatchLedger("app-new")
    assert new.append(rows(spark, 0, n=1), str(table), 0)
    assert batches_in(spark, table) == [0, 0, 1, 2, 3, 4]


def test_a_table_written_with_delta_txn_options_only_is_still_checked(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Tables written before marks existed carry only Delta's own txnAppId record."""
    table = tmp_path / "t"
    for batch in range(2):
        (
            rows(spark, batch)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "app-a")
            .option("txnVersion", batch)
            .save(str(table))
        )
    assert last_marked_batch(spark, str(table), "app-a") is None
    ledger = BatchLedger("app-a")
    assert not ledger.append(rows(spark, 1), str(table), 1)  # Delta itself skips the replay
    assert ledger.append(rows(spark, 2), str(table), 2)
    assert not ledger.append(rows(spark, 2), str(table), 2)
    assert batches_in(spark, table) == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_a_failed_write_is_looked_up_again(spark: SparkSession, tmp_path: Path) -> None:
    table = tmp_path / "t"
    ledger = BatchLedger("app-a")
    ledger.append(rows(spark, 0), str(table), 0)
    bad = spark.range(1).selectExpr("'not a number' as id", "cast(1 as long) as batch_id")
    with pytest.raises(Exception, match=r"(?i)merge|schema|type"):
        ledger.append(bad, str(table), 1)
    assert ledger.append(rows(spark, 1), str(table), 1)
    assert batches_in(spark, table) == [0, 0, 0, 1, 1, 1]


def test_the_app_id_belongs_to_the_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    first = checkpoint_app_id(spark, str(tmp_path / "cp"), "ingest")
    assert checkpoint_app_id(spark, str(tmp_path / "cp"), "ingest") == first
    assert checkpoint_app_id(spark, str(tmp_path / "other"), "ingest") != first


def test_a_replay_is_recognised_once_the_marked_commit_files_are_gone(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A shorter delta.logRetentionDuration deletes the commit files that hold the marks
    (at a checkpoint): the table's own record of app transactions still knows the batch."""
    table = tmp_path / "t"
    first = BatchLedger("app-a")
    for batch in range(3):
        first.append(rows(spark, batch), str(table), batch)
    # Someone else's commit (maintenance), then a checkpoint of it; Delta's log cleanup
    # then deletes the commit files before the checkpoint once the retention has passed.
    rows(spark, 99, n=1).write.format("delta").mode("append").save(str(table))
    RustDeltaTable(str(table)).create_checkpoint()
    for version in range(3):
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    assert last_marked_batch(spark, str(table), "app-a") is None  # no mark left to read
    restarted = BatchLedger("app-a")
    assert not restarted.append(rows(spark, 2), str(table), 2)  # the replay after the crash
    assert restarted.append(rows(spark, 3), str(table), 3)
    assert batches_in(spark, table) == [0] * 3 + [1] * 3 + [2] * 3 + [3] * 3 + [99]


def test_a_local_append_cleans_the_expired_log_up_once_in_cleanup_every(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """delta-rs cleans a log up after every commit, listing the whole folder with three
    stats per file: the ledger's appends do it once in CLEANUP_EVERY."""
    monkeypatch.setattr(delta_writes, "CLEANUP_EVERY", 10)
    table = tmp_path / "t"

    def arrow_rows(batch_id: int) -> pa.Table:
        return pa.table(
            {
                "id": pa.array([0, 1, 2], pa.int64()),
                "batch_id": pa.array([batch_id] * 3, pa.int64()),
            }
        )

    write_deltalake(
        str(table),
        arrow_rows(-1),
        configuration={
            "delta.checkpointInterval": "5",
            "delta.logRetentionDuration": "interval 1 seconds",
        },
    )
    oldest = table / "_delta_log" / f"{0:020d}.json"
    ledger = BatchLedger("app-a")
    for batch in range(8):  # appends 1..8 (versions 1..8, a checkpoint at 5): one cleanup
        assert ledger.append(arrow_rows(batch), str(table), batch, spark)
    # The scenario, not a synchronisation: versions 0..8 and the checkpoint at 5 are now past
    # the retention (a slower machine only ages them more; no assertion needs them young).
    time.sleep(1.5)
    for batch in (8, 9):  # appends 9 and 10: no cleanup (delta-rs alone would, at each)
        assert ledger.append(arrow_rows(batch), str(table), batch, spark)
    assert oldest.exists()
    assert ledger.append(arrow_rows(10), str(table), 10, spark)  # append 11 cleans up
    assert not oldest.exists()
    # Versions before that checkpoint are gone; every row is still there, once.
    assert batches_in(spark, table) == sorted([-1, *range(11)] * 3)


def test_a_table_created_by_its_first_append_has_its_spec(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A topic table is created by the coordinator's first append to it (one delta-rs commit,
    not Spark's CREATE before it): the same columns, properties and description as Spark's
    creation gives, and the batch mark in that first commit."""
    spec = topics.table("OrderPaid")
    by_spark, by_append = str(tmp_path / "spark"), str(tmp_path / "append")
    spec.create_at(spark, by_spark, timedelta(hours=6))
    empty = arrow_schema(topics.SCHEMA).empty_table()
    ledger = BatchLedger("app-a")
    assert ledger.append(
        empty, by_append, 7, spark, creating=spec, log_retention=timedelta(hours=6)
    )
    created, reference = RustDeltaTable(by_append), RustDeltaTable(by_spark)
    assert created.version() == 0  # created and written in one commit
    assert created.transaction_version("app-a") == 7
    assert created.metadata().configuration == reference.metadata().configuration
    assert created.metadata().configuration["delta.logRetentionDuration"] == "interval 6 hours"
    assert created.metadata().description == spec.description
    read = spark.read.format("delta")
    assert read.load(by_append).schema == read.load(by_spark).schema
    # An existing table keeps what it has: `creating` changes nothing there.
    assert ledger.append(empty, by_spark, 8, spark, creating=spec, log_retention=timedelta(1))
    assert RustDeltaTable(by_spark).metadata().configuration == reference.metadata().configuration


def test_a_table_reopened_every_reopen_every_appends_keeps_every_batch_once(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger opens a local table afresh once in REOPEN_EVERY appends (a kept-open
    delta-rs table commits slower and slower); across the reopenings, replays are still
    recognised and every batch is there once."""
    monkeypatch.setattr(delta_writes, "REOPEN_EVERY", 3)
    table = tmp_path / "t"
    ledger = BatchLedger("app-a")
    opened = []
    real_open = delta_writes.RustDeltaTable

    def counting_open(*args: object, **kwargs: object) -> RustDeltaTable:
        opened.append(args[0])
        return real_open(*args, **kwargs)

    monkeypatch.setattr(delta_writes, "RustDeltaTable", counting_open)
    monkeypatch.setattr(counting_open, "is_deltatable", real_open.is_deltatable, raising=False)

    def arrow_rows(batch_id: int) -> pa.Table:
        return pa.table({"batch_id": pa.array([batch_id] * 2, pa.int64())})

    for batch in range(10):
        assert ledger.append(arrow_rows(batch), str(table), batch, spark)
        assert not ledger.append(arrow_rows(batch), str(table), batch, spark)  # its replay
    # The first append looks for a history (no table yet) and creates it; append 2 opens it,
    # then appends 4, 7 and 10 open it afresh (after the 3rd, 6th and 9th).
    assert len(opened) == 5
    assert batches_in(spark, table) == sorted([*range(10)] * 2)
