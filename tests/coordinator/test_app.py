"""The coordinator as a spark-submit application: starts, delivers, stops cleanly on SIGTERM."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable
from kafka import KafkaProducer

from streams import ingress_format as fmt
from tests.app_process import AppProcess
from tests.conftest import unavailable

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def test_submitted_application_delivers_and_stops_cleanly(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    half_topic, op_topic = f"half-{suffix}", f"op-{suffix}"
    warehouse = tmp_path / "warehouse"
    app = AppProcess({
        "warehouse": str(warehouse),
        "kafka.bootstrap_servers": bootstrap_servers,
        "kafka.half_topic": half_topic,
        "kafka.op_topic": op_topic,
        "kafka.check_topic": f"check-{suffix}",
        "streams.checkpoint_dir": str(tmp_path / "checkpoints"),
        "spark.shuffle_partitions": "2",
    })  # fmt: skip
    try:
        if not app.wait_for_line("txcoord coordinator running", 240):
            unavailable("spark-submit", RuntimeError(app.tail()))
        producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
        producer.send(
            half_topic,
            key=b"tx-1",
            value=b"paid",
            headers=[(fmt.PRODUCER_GROUP, b"orders"), (fmt.TOPIC, b"OrderPaid")],
        )
        producer.send(op_topic, key=b"tx-1",
                      headers=[(fmt.PRODUCER_GROUP, b"orders"), (fmt.OP, b"COMMIT")])  # fmt: skip
        producer.flush()
        producer.close()
        table = warehouse / "topics" / "OrderPaid"
        deadline = time.monotonic() + 180
        rows: list[dict[str, object]] = []
        while time.monotonic() < deadline and not rows:
            time.sleep(2)
            if (table / "_delta_log").exists():
                rows = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
        assert [(r["transaction_id"], r["queue_offset"], r["body"]) for r in rows] == [
            ("tx-1", 0, b"paid")
        ], app.tail()
    finally:
        code = app.terminate()
    assert code == 0, app.tail()
    assert "txcoord coordinator stopped cleanly" in app.tail(400), app.tail()
