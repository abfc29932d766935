"""Stopping `txcoord up` while producers send (issue 16): quiet, and nothing lost.

`kill` (SIGTERM to txcoord alone) and Ctrl-C (SIGINT to the whole process group) stop the stack
in the middle of traffic, so micro-batches are running when the stop comes. Each stop must print
"stopped cleanly" and nothing that reads like a failure: no Java StackOverflowError (Spark's
regex over a huge interrupted-callback message), no py4j InterruptedException traceback, no
ERROR line from Spark or py4j. And a stop is not a crash: every commit the REST ingress
acknowledged before the stop is delivered exactly once after the restart.
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable

from coordinator.local_stack.kafka_broker import free_port
from tests.quiet_stop import noise_in
from tests.up_process import Up

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


class Traffic:
    """One producer over REST (send, then commit) in a loop until stopped or refused."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.prepared: list[str] = []
        self.committed: list[str] = []  # commits the ingress acknowledged (202)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with httpx.Client(base_url=self.base, timeout=30) as client:
            while not self._stop.is_set():
                try:
                    sent = client.post("/v1/transactions", json={
                        "producer_group": "orders", "topic": "OrderPaid", "body": "paid",
                    })  # fmt: skip
                    if sent.status_code != 201:
                        return
                    tx = sent.json()["transaction_id"]
                    self.prepared.append(tx)
                    done = client.post(f"/v1/transactions/{tx}/commit",
                                       json={"producer_group": "orders"})  # fmt: skip
                    if done.status_code != 202:
                        return
                    self.committed.append(tx)
                except httpx.HTTPError:
                    return  # the ingress has stopped

    def wait_until_delivering(self, timeout: float = 420) -> None:
        """Return once a commit of this traffic reads COMMITTED: batches are flowing."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.committed:
                answer = httpx.get(f"{self.base}/v1/transactions/{self.committed[0]}", timeout=10)
                if answer.status_code == 200 and answer.json()["state"] == "COMMITTED":
                    return
            time.sleep(1)
        pytest.fail(f"no commit of the traffic was COMMITTED within {timeout:.0f} s")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def assert_quiet(up: Up) -> None:
    """The stop said it stopped cleanly and printed none of the failure noise."""
    output = up.text()
    assert "stopped cleanly" in output, output[-6000:]
    found = noise_in(output)
    assert not found, f"{found} in the output:\n{output[-20000:]}"


def delivered(warehouse: Path) -> Counter[str]:
    """Return how often each transaction id was delivered to topics/OrderPaid."""
    table = DeltaTable(str(warehouse / "topics" / "OrderPaid")).to_pyarrow_table()
    return Counter(table.column("transaction_id").to_pylist())


# Spark and Kafka can start here (the session's own did): a stack that does not come up fails.
@pytest.mark.usefixtures("spark", "kafka_broker")
@pytest.mark.timeout(1800)  # two stack starts, each 1-5 min on a loaded 2-core box
def test_kill_and_ctrl_c_mid_traffic_stop_quietly_and_lose_nothing(tmp_path: Path) -> None:
    state_dir, warehouse, rest_port = tmp_path / "var", tmp_path / "warehouse", free_port()
    base = f"http://127.0.0.1:{rest_port}"
    running: list[Up] = []
    try:
        first = Up(state_dir, warehouse, rest_port, "metrics.port=0")
        running.append(first)
        first.wait_for(r"txcoord is up: ", timeout=600)
        traffic = Traffic(base)
        traffic.wait_until_delivering()
        assert first.stop(signal.SIGTERM, group=False) == 0, first.text()[-6000:]  # `kill`
        traffic.stop()
        assert_quiet(first)

        second = Up(state_dir, warehouse, rest_port, "metrics.port=0")
        running.append(second)
        second.wait_for(r"txcoord is up: ", timeout=600)
        # Whatever the stop cut short is replayed: every acknowledged commit is delivered once.
        deadline = time.monotonic() + 420
        while not set(traffic.committed) <= set(delivered(warehouse)):
            assert time.monotonic() < deadline, second.text()[-6000:]
            time.sleep(2)
        copies = delivered(warehouse)
        assert max(copies.values()) == 1, [tx for tx, n in copies.items() if n > 1]
        assert set(copies) <= set(traffic.prepared)

        more = Traffic(base)
        more.wait_until_delivering()
        assert second.stop(signal.SIGINT) == 0, second.text()[-6000:]  # Ctrl-C: the whole group
        more.stop()
        assert_quiet(second)
    finally:
        for up in running:  # a failed assertion must not leave a stack running
            if up.process.poll() is None:
                up.stop(signal.SIGKILL)
