"""The lean progress listener: every batch's progress as one JSON document, on a real query."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streams.progress.batch_log import ProgressLog
from streams.progress.listener import ProgressListener, listen
from tests.harness import wait_for

pytestmark = pytest.mark.spark


class Kept(ProgressListener):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[dict[str, Any]] = []

    def on_progress(self, progress: dict[str, Any]) -> None:
        with self.lock:
            self.seen.append(progress)

    def of(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            return [p for p in self.seen if p.get("name") == name]


class Failing(ProgressListener):
    def __init__(self) -> None:
        self.calls = 0

    def on_progress(self, progress: dict[str, Any]) -> None:
        self.calls += 1
        raise RuntimeError("a listener's own bug")


def test_each_batch_arrives_as_its_json_and_a_failing_listener_harms_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    name = f"progress-{uuid.uuid4().hex[:8]}"
    kept, failing, log = Kept(), Failing(), ProgressLog()
    removers = [listen(spark, failing), listen(spark, kept), listen(spark, log)]
    rows = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
    counts = (
        rows.withWatermark("timestamp", "1 second")
        .groupBy(F.window("timestamp", "1 second"))
        .count()
    )
    query = (
        counts.writeStream.queryName(name)
        .format("noop")
        .outputMode("append")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: len(kept.of(name)) >= 4, 120, "four batches' progress")
        assert query.isActive and query.exception() is None
        query.stop()
        # Spark's listener bus delivers each event after its batch, to one listener after the
        # other: all three have the stopped query's last progress before any is removed.
        progress = query.lastProgress
        assert progress is not None
        last = progress.batchId
        wait_for(
            lambda: kept.of(name)[-1]["batchId"] == last == log.last[name]["batch"],
            60,
            "the last batch's progress to reach every listener",
        )
    finally:
        query.stop()
        for remove in removers:
            remove()
    progresses = kept.of(name)
    # The same document PySpark's StreamingQueryProgress.json gives: ids, batch, operators.
    assert [p["batchId"] for p in progresses] == sorted({p["batchId"] for p in progresses})
    assert all(p["id"] == str(query.id) for p in progresses)
    assert any(p["numInputRows"] > 0 for p in progresses)
    operators = progresses[-1]["stateOperators"]
    assert len(operators) == 1 and "numRowsTotal" in operators[0], operators
    assert failing.calls >= len(progresses)  # it was called, raised, and the rest went on
    assert log.batches[name] >= len(progresses) and log.dropped_late(name) == 0
    assert log.last[name]["batch"] == progresses[-1]["batchId"]
    # Removed: a new query's batches reach no listener. A listener added now shows that the bus
    # has delivered them: it gets each event after the removed one would have.
    after = f"{name}-after"
    seen = len(kept.seen)
    marker = Kept()
    unlisten = listen(spark, marker)
    again = (
        rows.writeStream.queryName(after)
        .format("noop")
        .option("checkpointLocation", str(tmp_path / "checkpoint-after"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_for(
            lambda: any(p["batchId"] >= 2 for p in marker.of(after)),
            120,
            "the second query's batches to reach a listener",
        )
    finally:
        again.stop()
        unlisten()
    assert kept.of(after) == [] and len(kept.seen) == seen
