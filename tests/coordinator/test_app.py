"""The coordinator as a spark-submit application: starts, delivers, stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from deltalake import DeltaTable
from kafka import KafkaProducer

from coordinator.local_stack.artifacts import PROJECT_ROOT
from streams import ingress_format as fmt
from tests.conftest import unavailable

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def python_driver_of(jvm_pid: int) -> int | None:
    """Return the pid of the Python driver that spark-submit's JVM started, if it runs."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == jvm_pid and b"coordinator/app.py" in cmdline:
            return int(stat.parent.name)
    return None


def test_submitted_application_delivers_and_stops_cleanly(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    half_topic, op_topic = f"half-{suffix}", f"op-{suffix}"
    warehouse = tmp_path / "warehouse"
    command = [
        str(PROJECT_ROOT / "deploy" / "submit-coordinator"),
        "--master", "local[2]", "--driver-memory", "1g", "--",
        "--set", f"warehouse={warehouse}",
        "--set", f"kafka.bootstrap_servers={bootstrap_servers}",
        "--set", f"kafka.half_topic={half_topic}",
        "--set", f"kafka.op_topic={op_topic}",
        "--set", f"kafka.check_topic=check-{suffix}",
        "--set", f"streams.checkpoint_dir={tmp_path / 'checkpoints'}",
        "--set", "spark.shuffle_partitions=2",
    ]  # fmt: skip
    app = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue[str] = queue.Queue()
    output: list[str] = []

    def read() -> None:
        assert app.stdout is not None
        for line in app.stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def wait_for_line(text: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                output.append(lines.get(timeout=1))
            except queue.Empty:
                if app.poll() is not None:
                    return False
                continue
            if text in output[-1]:
                return True
        return False

    try:
        if not wait_for_line("txcoord coordinator running", 240):
            unavailable("spark-submit", RuntimeError("".join(output[-40:])))
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
        ], "".join(output[-40:])
    finally:
        # spark-submit's JVM runs the Python driver as its child; SIGTERM to the driver is
        # the graceful stop (SIGTERM to the JVM kills both: safe, but not clean).
        driver = python_driver_of(app.pid)
        if driver is not None:
            os.kill(driver, signal.SIGTERM)
        elif app.poll() is None:
            app.send_signal(signal.SIGTERM)
        code = app.wait(120)
        reader.join(10)
    while not lines.empty():
        output.append(lines.get())
    assert code == 0, "".join(output[-40:])
    assert any("txcoord coordinator stopped cleanly" in line for line in output), output[-20:]
