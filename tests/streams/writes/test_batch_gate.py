"""An orderly stop through the batch gate: the batch in flight finishes, the next one parks and
is left to replay, and nothing is logged as an error. Real streaming queries."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from coordinator.runtime.engine import stop_quietly
from streams.writes.batch_gate import BatchGate, BatchStopped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

pytestmark = pytest.mark.spark

Body = Callable[["DataFrame", int], None]


class Batches:
    """A gated foreachBatch function that records which batches started and finished."""

    def __init__(self, gate: BatchGate, body: Body) -> None:
        self.gate, self.body = gate, body
        self.started: list[int] = []
        self.finished: list[int] = []

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        with self.gate.batch(frame.sparkSession, batch_id):
            self.started.append(batch_id)
            self.body(frame, batch_id)
            self.finished.append(batch_id)

    def wait_in_flight(self, timeout: float = 120) -> int:
        """Return the id of a batch whose work has started and not finished."""
        deadline = time.monotonic() + timeout
        while len(self.started) == len(self.finished):
            assert time.monotonic() < deadline, "no batch started"
            time.sleep(0.05)
        return self.started[-1]


@pytest.fixture
def run(spark: SparkSession, tmp_path: Path) -> Iterator[Callable[[Body], StreamingQuery]]:
    queries: list[StreamingQuery] = []

    def start(batches: Batches) -> StreamingQuery:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 20)
            .load()
            .writeStream.foreachBatch(batches)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="0 seconds")
            .start()
        )
        queries.append(query)
        return query

    yield start  # type: ignore[misc]
    for query in queries:
        query.stop()


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_stop_lets_the_batch_finish_and_the_next_waits_for_replay(
    run: Callable[[Batches], StreamingQuery], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gate = BatchGate()

    def slow(frame: DataFrame, batch_id: int) -> None:
        frame.count()
        # The stop arrives while this batch works: it goes on once the gate is closed (a
        # fixed sleep could end before a stalled test closed it: that batch then finished
        # before the stop, and the next one ran), then works on, which a stop that did not
        # wait for it would interrupt.
        deadline = time.monotonic() + 120
        while not gate.closed and time.monotonic() < deadline:
            time.sleep(0.05)
        frame.count()

    batches = Batches(gate, slow)
    query = run(batches)
    in_flight = batches.wait_in_flight()
    stop_quietly(query, gate)
    assert batches.finished[-1] == in_flight  # finished, not interrupted
    assert batches.started == batches.finished  # and the next one never started its work
    assert not query.isActive and query.exception() is None  # "Stopped", not failed
    assert errors(caplog) == []
    checkpoint = tmp_path / "checkpoint"
    assert (checkpoint / "commits" / str(in_flight)).exists()
    assert not (checkpoint / "commits" / str(in_flight + 1)).exists()
    # Two right ways to stop: the next batch reached the closed gate and parked there
    # (planned in the offset log, never committed: the next start runs it), or the stop
    # came in the moment between two triggers (a 0 s trigger leaves a few milliseconds).
    if gate.parked:
        assert (checkpoint / "offsets" / str(in_flight + 1)).exists()


def test_a_stop_in_a_hurry_cuts_the_batch_short_as_a_stop_not_a_failure(
    run: Callable[[Batches], StreamingQuery], caplog: pytest.LogCaptureFixture
) -> None:
    def stuck(frame: DataFrame, batch_id: int) -> None:
        jvm = frame.sparkSession.sparkContext._jvm
        assert jvm is not None
        jvm.java.lang.Thread.sleep(300_000)  # on the stream thread: the stop interrupts it

    gate = BatchGate()
    batches = Batches(gate, stuck)
    query = run(batches)
    batches.wait_in_flight()
    hurry = threading.Event()
    hurry.set()
    stop_quietly(query, gate, hurry)
    assert batches.finished == []
    assert not query.isActive and query.exception() is None
    assert errors(caplog) == []


def test_a_stopped_batch_reads_as_spark_reads_an_interrupted_callback() -> None:
    # StreamExecution.PROXY_ERROR: "...Error: An error occurred while calling" ... then one of
    # the interruption class names; the message stays short so Spark's regex cannot overflow.
    message = str(BatchStopped(7))
    assert message.startswith("py4j.protocol.Py4JJavaError: An error occurred while calling")
    assert message.endswith("java.lang.InterruptedException")
    assert len(message) < 200
