"""Table maintenance: compaction where safe, VACUUM never below what the coordinator reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RustDeltaTable
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from coordinator.admin.maintenance import (
    LISTING_PARALLELISM,
    SAFETY_MARGIN,
    Maintenance,
    listing_parallelism,
    stream_positions,
    vacuum_refusal,
)
from coordinator.core.config import Config
from coordinator.protocol.deliveries import delta_rs_location
from coordinator.runtime.local_stack.s3_server import S3Server
from delta_tables.table import REMOVED_FILES_PROPERTY
from tests.harness import TOPIC, Engine, Producer, rows, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = pytest.mark.long

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def offsets_file(folder: Path, batch: int, *versions: tuple[str, int]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    sources = [
        json.dumps(
            {
                "sourceVersion": 1,
                "reservoirId": table_id,
                "reservoirVersion": version,
                "index": -1,
                "isStartingVersion": False,
            }
        )
        for table_id, version in versions
    ]
    (folder / str(batch)).write_text("\n".join(["v1", '{"batchWatermarkMs":0}', *sources]))


def test_stream_positions_take_the_oldest_version_any_kept_batch_may_read(
    tmp_path: Path,
) -> None:
    offsets = tmp_path / "offsets"
    offsets_file(offsets, 7, ("halves", 40), ("ops", 12))
    offsets_file(offsets, 8, ("halves", 44), ("ops", 11))
    (offsets / ".8.crc").write_text("not an offsets file")
    assert stream_positions(tmp_path) == {"halves": 40, "ops": 11}
    assert stream_positions(tmp_path / "missing") == {}


def test_a_streamed_table_is_vacuumed_only_when_its_retention_covers_the_stream() -> None:
    week = timedelta(days=7)
    assert vacuum_refusal(week, None, NOW) is None
    assert vacuum_refusal(week, NOW - timedelta(days=6), NOW) is None
    behind = vacuum_refusal(week, NOW - week + SAFETY_MARGIN + timedelta(minutes=1), NOW)
    assert behind is None
    refused = vacuum_refusal(week, NOW - timedelta(days=7), NOW)
    assert refused is not None and "may still read" in refused
    unreadable = vacuum_refusal(None, None, NOW)
    assert unreadable is not None and "not a plain interval" in unreadable


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config(**{"streams.trigger_interval": "1s", "streams.tick_interval": "1s"})


def delivered(spark: SparkSession, config: Config) -> list[str]:
    if not (Path(config.warehouse) / "topics" / TOPIC / "_delta_log").is_dir():
        return []  # nothing delivered yet
    return sorted(r.transaction_id for r in rows(config, f"topics/{TOPIC}"))


@pytest.mark.spark
@pytest.mark.kafka
def test_maintenance_compacts_outputs_and_keeps_the_streams_whole(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    producer = Producer(config)
    for batch in range(3):  # three commits: three files in the topic table
        producer.half(f"tx-{batch}")
        producer.op(f"tx-{batch}", "COMMIT")
        producer.flush()

        def landed(b: int = batch) -> bool:
            return len(delivered(spark, config)) > b

        wait_for(landed, 180, f"tx-{batch}")

    # While the streams run: the coordinator's checkpoint is read for the streamed tables.
    # (Three tables: VACUUM lists each in a Spark job.)
    names = [f"topics/{TOPIC}", "system/half_messages", "system/op_records"]
    reports = {r.name: r for r in Maintenance(spark, config).run(tables=names)}
    topic = reports[f"topics/{TOPIC}"]
    assert topic.optimized and topic.files_before >= 3 and topic.files_after == 1, topic
    # The table's own retention: the engine created it with streams.log_retention (1 h).
    assert topic.vacuumed and topic.retention_hours == 1, topic
    for streamed in ("system/half_messages", "system/op_records"):
        # Compacted like the rest (heartbeats alone land nothing, so no file came since).
        assert reports[streamed].optimized, reports[streamed]
        assert reports[streamed].files_before >= 3 and reports[streamed].files_after == 1
        assert reports[streamed].vacuumed, reports[streamed]  # an hour covers a live stream

    # The streams keep going over the maintained tables: one more, exactly once.
    producer.half("after")
    producer.op("after", "COMMIT")
    producer.close()
    wait_for(lambda: "after" in delivered(spark, config), 180, "the transaction after")
    assert delivered(spark, config) == ["after", "tx-0", "tx-1", "tx-2"]
    offsets = sorted(
        r.queue_offset for r in table(spark, config, f"topics/{TOPIC}").collect() if r.queue_id == 0
    )
    assert offsets == list(range(len(offsets)))


@pytest.mark.spark
def test_vacuum_lists_with_a_few_tasks_per_core_unless_the_user_said_otherwise(
    spark: SparkSession,
) -> None:
    cores = spark.sparkContext.defaultParallelism
    assert spark.conf.get(LISTING_PARALLELISM) == "10000"  # Spark's default: 10,000 tasks
    with listing_parallelism(spark):
        assert spark.conf.get(LISTING_PARALLELISM) == str(4 * cores)
    assert spark.conf.get(LISTING_PARALLELISM) == "10000"  # restored
    spark.conf.set(LISTING_PARALLELISM, "3")
    try:
        with listing_parallelism(spark):
            assert spark.conf.get(LISTING_PARALLELISM) == "3"  # the user's choice stands
    finally:
        spark.conf.unset(LISTING_PARALLELISM)


@pytest.mark.spark
def test_on_s3_maintenance_commits_with_delta_rs(
    spark: SparkSession, s3_api: S3Server, s3_warehouse: str, make_config: ConfigFactory
) -> None:
    """On an S3 API the coordinator commits with delta-rs (a conditional PUT); maintenance
    must too, or its plain-PUT commit could overwrite a batch's made at the same moment."""
    s3_api.configure(spark)
    config = make_config(warehouse=s3_warehouse)
    topic = f"{s3_warehouse}/topics/{TOPIC}"
    kept = {REMOVED_FILES_PROPERTY: "interval 1 hours"}
    for n in range(3):  # three appends: three files, as three batches would leave
        rows = pa.table({"transaction_id": [f"tx-{n}"]})
        write_deltalake(delta_rs_location(topic), rows, mode="append", configuration=kept)
    (report,) = Maintenance(spark, config).run(tables=[f"topics/{TOPIC}"])
    assert report.optimized and report.files_before == 3 and report.files_after == 1, report
    assert report.vacuumed and report.retention_hours == 1, report
    history = RustDeltaTable(delta_rs_location(topic)).history()
    # delta-rs's VACUUM commits only when it deletes a file: none is old enough yet.
    assert [h["operation"] for h in history] == ["OPTIMIZE", "WRITE", "WRITE", "WRITE"]
    assert all("delta-rs" in h.get("clientVersion", "") for h in history), history
    rows = RustDeltaTable(delta_rs_location(topic)).to_pyarrow_table().column(0).to_pylist()
    assert sorted(rows) == ["tx-0", "tx-1", "tx-2"]
