"""`txcoord up` brings the stack up healthy, stops cleanly on Ctrl-C, and restarts in place."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable

from coordinator.local_stack.kafka_broker import free_port, read_info
from tests.up_process import Up

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

DEMO_KINDS = ("commit", "rollback", "checked-commit", "never-answers")


def state_of(base: str, tx: str) -> str | None:
    response = httpx.get(f"{base}/v1/transactions/{tx}", timeout=10)
    return response.json()["state"] if response.status_code == 200 else None


# Spark and Kafka can start here (the session's own did): a stack that does not come up fails.
@pytest.mark.usefixtures("spark", "kafka_broker")
def test_up_runs_the_whole_stack_stops_on_ctrl_c_and_restarts_in_place(tmp_path: Path) -> None:
    state_dir, warehouse, rest_port = tmp_path / "var", tmp_path / "warehouse", free_port()
    base = f"http://127.0.0.1:{rest_port}"

    running: list[Up] = []
    try:
        first = Up(state_dir, warehouse, rest_port)
        running.append(first)
        port = first.wait_for(r"txcoord is up: kafka at 127\.0\.0\.1:(\d+)").group(1)
        text = "".join(first.output)
        assert re.search(r"kafka: healthy - 127\.0\.0\.1:\d+, cluster \S+, 1 broker", text), text
        assert "spark: healthy - Spark 4.2.0 on local[2], delta + kafka connector ok" in text, text
        assert "streams: healthy - coordinator running" in text, text
        assert f"rest: healthy - {base}" in text, text
        # A transaction through the REST ingress, the streams, and back out of the Delta tables.
        sent = httpx.post(f"{base}/v1/transactions", timeout=30, json={
            "producer_group": "orders", "topic": "OrderPaid", "body": "paid",
        })  # fmt: skip
        assert sent.status_code == 201, sent.text
        tx = sent.json()["transaction_id"]
        done = httpx.post(f"{base}/v1/transactions/{tx}/commit", timeout=30,
                          json={"producer_group": "orders"})  # fmt: skip
        assert done.status_code == 202, done.text
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and state_of(base, tx) != "COMMITTED":
            time.sleep(2)
        assert state_of(base, tx) == "COMMITTED", "".join(first.output[-30:])
        # The demo's sample producers (SDK over REST) against the running stack.
        demo = subprocess.run(
            [sys.executable, "-m", "coordinator", "demo", "--endpoint", base, "--each", "1",
             "--wait", "240"],
            capture_output=True, text=True, timeout=400, check=False,
            env={**os.environ, "COLUMNS": "200"},
        )  # fmt: skip
        assert demo.returncode == 0, demo.stdout + demo.stderr
        cells = [[cell.strip() for cell in line.split("│")[1:-1]]
                 for line in demo.stdout.splitlines() if line.count("│") >= 5]  # fmt: skip
        outcome = {row[0]: row[2] for row in cells if row and row[0] in DEMO_KINDS}
        assert outcome == {
            "commit": "COMMITTED", "rollback": "ROLLED_BACK",
            "checked-commit": "COMMITTED", "never-answers": "CHECKING",
        }, demo.stdout  # fmt: skip
        assert first.stop(signal.SIGINT) == 0, "".join(first.output)  # Ctrl-C: whole group
        assert "stopped cleanly" in "".join(first.output)
        broker = read_info((state_dir / "kafka").resolve())
        assert broker is not None and broker.pid is None  # the broker was stopped, not orphaned

        second = Up(state_dir, warehouse, rest_port)
        running.append(second)
        assert second.wait_for(r"txcoord is up: kafka at 127\.0\.0\.1:(\d+)").group(1) == port
        assert state_of(base, tx) == "COMMITTED"  # same warehouse, same answer
        delivered = DeltaTable(str(warehouse / "topics" / "OrderPaid")).to_pyarrow_table()
        assert delivered.column("transaction_id").to_pylist() == [tx]
        assert second.stop(signal.SIGTERM, group=False) == 0, "".join(second.output)
        assert "stopped cleanly" in "".join(second.output)
    finally:
        for up in running:  # a failed assertion must not leave a stack running
            if up.process.poll() is None:
                up.stop(signal.SIGKILL)
