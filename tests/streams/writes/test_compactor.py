"""The engine's compactor folds the small files of every table with enough of them."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from deltalake import DeltaTable as RustDeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from coordinator.core.errors import WriterFencedError
from delta_tables import half_messages, topics, transactions
from delta_tables.registry import create_system_tables
from delta_tables.table import TableSpec
from streams.writes.compactor import Compactor
from streams.writes.delta_writes import BatchLedger
from streams.writes.writer_fence import claim_epoch

pytestmark = pytest.mark.spark

FILES = 4


def _append_files(spark: SparkSession, spec: TableSpec, warehouse: str, count: int) -> None:
    """Append `count` one-row files to `spec`'s table, copying a row of the right shape."""
    location = spec.path(warehouse)
    schema = spark.read.format("delta").load(location).schema
    values = {"string": "x", "int": 1, "bigint": 1, "boolean": True, "timestamp": datetime.now(UTC)}
    row = tuple(values.get(field.dataType.simpleString()) for field in schema)
    frame = spark.createDataFrame([row], schema)
    for _ in range(count):
        frame.write.format("delta").mode("append").save(location)


def test_tables_with_enough_files_are_compacted_and_keep_their_rows(
    spark: SparkSession, warehouse: Path
) -> None:
    home = str(warehouse)
    create_system_tables(spark, home)
    topic = topics.table("OrderPaid")
    topic.create_if_absent(spark, home)
    compactor = Compactor(spark, home, timedelta(0), min_files=FILES)
    for spec, count in (
        (transactions.TABLE, FILES),
        (half_messages.TABLE, FILES),
        (topic, FILES - 1),
    ):
        _append_files(spark, spec, home, count)
    assert sorted(compactor.compact_once()) == [half_messages.TABLE.name, transactions.TABLE.name]
    for spec in (transactions.TABLE, half_messages.TABLE):  # the landed input too
        assert compactor.files(spec.name) == 1
        assert spark.read.format("delta").load(spec.path(home)).count() == FILES
    # A table below the threshold is left alone.
    assert compactor.files(topic.name) == FILES - 1
    assert compactor.compact_once() == []


def test_the_thread_compacts_on_its_interval_and_stops(
    spark: SparkSession, warehouse: Path
) -> None:
    home = str(warehouse)
    create_system_tables(spark, home)
    _append_files(spark, transactions.TABLE, home, FILES)
    compactor = Compactor(spark, home, timedelta(seconds=0.2), min_files=FILES).start()
    try:
        deadline = time.monotonic() + 60
        while compactor.files(transactions.TABLE.name) > 1:
            assert time.monotonic() < deadline, "the compactor never compacted"
            time.sleep(0.2)
    finally:
        compactor.stop()
    assert compactor._thread is None


def test_batches_appended_while_the_compactor_folds_the_table_are_all_kept_once(
    spark: SparkSession, warehouse: Path
) -> None:
    """Appends (streams/writes/delta_writes.py) and compactions commit side by side, both with
    delta-rs: each commit takes its version with a no-replace rename, so neither can
    overwrite the other's commit (a lost append would lose a batch's rows)."""
    home = str(warehouse)
    create_system_tables(spark, home)
    location = transactions.TABLE.path(home)
    schema = spark.read.format("delta").load(location).schema
    row = spark.createDataFrame(
        [
            (
                "t",
                "m",
                "g",
                "T",
                0,
                "COMMITTED",
                None,
                0,
                None,
                datetime.now(UTC),
                datetime.now(UTC),
                0,
            )
        ],
        schema,
    )
    compactor = Compactor(spark, home, timedelta(seconds=0.1), min_files=2).start()
    ledger = BatchLedger("app-compacted")
    batches = 30
    try:
        for batch in range(batches):
            assert ledger.append(
                row.withColumn("batch_id", F.lit(batch).cast("long")), location, batch
            )
    finally:
        compactor.stop()
    written = spark.read.format("delta").load(location).select("batch_id").collect()
    assert sorted(r.batch_id for r in written) == list(range(batches))
    operations = [c["operation"] for c in RustDeltaTable(location).history()]
    assert "OPTIMIZE" in operations, "the compactor never ran beside the appends"


def test_a_stream_of_the_landed_input_reads_every_row_once_across_a_compaction(
    spark: SparkSession, warehouse: Path, tmp_path: Path
) -> None:
    """A notebook or downstream job may read system/half_messages as a Delta stream: the
    compaction's commit (dataChange = false) is skipped, no row is read twice or lost."""
    home = str(warehouse)
    create_system_tables(spark, home)
    source = half_messages.TABLE.path(home)
    sink, checkpoint = str(tmp_path / "sink"), str(tmp_path / "checkpoint")

    def drain() -> int:
        query = (
            spark.readStream.format("delta")
            .load(source)
            .writeStream.format("delta")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start(sink)
        )
        query.awaitTermination(120)
        assert query.exception() is None
        return spark.read.format("delta").load(sink).count()

    _append_files(spark, half_messages.TABLE, home, FILES)
    assert drain() == FILES
    compactor = Compactor(spark, home, timedelta(0), min_files=FILES)
    assert half_messages.TABLE.name in compactor.compact_once()
    assert compactor.files(half_messages.TABLE.name) == 1
    _append_files(spark, half_messages.TABLE, home, 2)
    assert drain() == FILES + 2


def test_a_fenced_coordinator_compacts_nothing(spark: SparkSession, warehouse: Path) -> None:
    """Issue 60, item 5: the compactor of a coordinator a newer one fenced made commits in
    the newer one's tables (OPTIMIZE, every compact_interval) until its process ended. Now it
    asks the fence first (the newest claim, the table's epoch) and stops for good."""
    home = str(warehouse)
    create_system_tables(spark, home)
    _append_files(spark, transactions.TABLE, home, FILES)
    older = claim_epoch(spark, home, "app-older", "ckpt-older")
    claim_epoch(spark, home, "app-newer", "ckpt-newer")
    versions = RustDeltaTable(transactions.TABLE.path(home)).version()
    compactor = Compactor(spark, home, timedelta(seconds=0.1), min_files=FILES, fence=older)
    with pytest.raises(WriterFencedError, match="is fenced"):
        compactor.compact_once()
    compactor.start()
    try:
        deadline = time.monotonic() + 30
        while compactor._thread is not None and compactor._thread.is_alive():
            assert time.monotonic() < deadline, "the fenced compactor's thread went on"
            time.sleep(0.1)
    finally:
        compactor.stop()
    assert RustDeltaTable(transactions.TABLE.path(home)).version() == versions
    assert compactor.files(transactions.TABLE.name) == FILES


def test_a_table_a_newer_coordinator_fenced_is_not_compacted_by_the_older(
    spark: SparkSession, warehouse: Path
) -> None:
    home = str(warehouse)
    create_system_tables(spark, home)
    _append_files(spark, transactions.TABLE, home, FILES)
    older = claim_epoch(spark, home, "app-older", "ckpt-older")
    newer = claim_epoch(spark, home, "app-newer", "ckpt-newer")
    newer.fence_table(transactions.TABLE.path(home))
    # The notice alone would stop it; the table's own epoch is asked too (a claim the
    # notice has not seen yet, on a warehouse whose claims table it read before).
    older.notice = lambda: None  # type: ignore[method-assign]
    compactor = Compactor(spark, home, timedelta(0), min_files=FILES, fence=older)
    with pytest.raises(WriterFencedError, match="is fenced"):
        compactor.compact_once()
    assert compactor.files(transactions.TABLE.name) == FILES
