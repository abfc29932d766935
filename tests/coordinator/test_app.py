"""The coordinator as a spark-submit application: starts, delivers, stops cleanly on SIGTERM."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable
from kafka import KafkaProducer

from coordinator.protocol import ingress as fmt
from coordinator.runtime import class_archives
from coordinator.runtime.spark_session import JIT_OPTIONS
from tests.app_process import AppProcess
from tests.class_archive_check import assert_starts_from_archive
from tests.quiet_stop import noise_in

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.mark.usefixtures("spark")  # Spark can start here: an application that does not is failing
def test_submitted_application_delivers_and_stops_cleanly(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    half_topic, op_topic = f"half-{suffix}", f"op-{suffix}"
    warehouse = tmp_path / "warehouse"
    app = AppProcess(
        {
            "warehouse": str(warehouse),
            "kafka.bootstrap_servers": bootstrap_servers,
            "kafka.half_topic": half_topic,
            "kafka.op_topic": op_topic,
            "kafka.check_topic": f"check-{suffix}",
            "streams.checkpoint_dir": str(tmp_path / "checkpoints"),
            "spark.shuffle_partitions": "2",
            "metrics.port": "0",
        }
    )
    try:
        assert app.wait_for_line("txcoord coordinator running", 240), app.tail()
        producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
        producer.send(
            half_topic,
            key=b"tx-1",
            value=b"paid",
            headers=[(fmt.PRODUCER_GROUP, b"orders"), (fmt.TOPIC, b"OrderPaid")],
        )
        producer.send(
            op_topic, key=b"tx-1", headers=[(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, b"COMMIT")]
        )
        producer.flush()
        producer.close()
        table = warehouse / "topics" / "OrderPaid"
        deadline = time.monotonic() + 180
        rows: list[dict[str, object]] = []
        while time.monotonic() < deadline and not rows:
            time.sleep(2)
            if any((table / "_delta_log").glob("*.json")):  # a commit, not just the folder
                rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
        assert [(r["transaction_id"], r["queue_offset"], r["body"]) for r in rows] == [
            ("tx-1", 0, b"paid")
        ], app.tail()
        assert_driver_metrics(app)
        # spark-submit's JVM (the script execs it) compiles huge generated methods.
        java = Path(f"/proc/{app.process.pid}/cmdline").read_bytes().split(b"\0")
        assert JIT_OPTIONS.encode() in java, java
        # ... and starts from the install step's class archive
        # (coordinator/runtime/class_archives.py).
        assert_starts_from_archive(app.process.pid, class_archives.SPARK_DRIVER)
    finally:
        code = app.terminate()
    assert code == 0, app.tail()
    output = app.tail(100_000)
    assert "txcoord coordinator stopped cleanly" in output, app.tail()
    assert noise_in(output) == [], output[-20000:]  # SIGTERM is an ordinary stop


def scrape(url: str) -> dict[str, float]:
    """Return the samples of a Prometheus text page: 'name{labels}' -> value."""
    text = httpx.get(url, timeout=10).text
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def assert_driver_metrics(app: AppProcess) -> None:
    """The driver serves RocketMQ's transaction metrics and the streams' own."""
    (line,) = [line for line in app.output if "txcoord coordinator running; metrics at" in line]
    url = line.split("metrics at ", 1)[1].strip()
    batches = 'txcoord_batches_total{query="txcoord-coordinator"}'
    deadline = time.monotonic() + 60
    # The commit is counted by the batch's writer; the batch itself once Spark posts its
    # progress, a little later (the listener bus): wait for both.
    while (samples := scrape(url)).get("rocketmq_commit_messages_total") != 1.0 or (
        batches not in samples
    ):
        assert time.monotonic() < deadline, samples
        time.sleep(1)
    assert samples['rocketmq_half_messages{topic="OrderPaid"}'] == 0.0, samples
    assert samples["rocketmq_rollback_messages_total"] == 0.0
    assert samples["rocketmq_finish_message_latency_seconds_count"] == 1.0
    assert samples['rocketmq_finish_message_latency_seconds_bucket{le="+Inf"}'] == 1.0
    assert 0 < samples["rocketmq_finish_message_latency_seconds_sum"] < 600
    assert samples["txcoord_half_messages_total"] == 1.0
    assert samples[batches] >= 1
    assert samples['txcoord_rows_dropped_late_total{query="txcoord-coordinator"}'] == 0.0
