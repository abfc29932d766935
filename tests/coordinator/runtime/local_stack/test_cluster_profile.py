"""`txcoord up --cluster`: the production shape comes up in one command, round trips, stops.

Every part a real process on loopback (coordinator/runtime/local_stack/cluster_profile.py):
moto's S3 server holding the warehouse and the checkpoints, three KRaft brokers, a Spark
master with two workers, the coordinator submitted to them with `deploy/submit-coordinator`,
the REST ingress. The README's round trip (a half, its commit, the state read back as
COMMITTED) must work through it, the committed message must be in the topic's table on S3,
and Ctrl-C must stop every part ("stopped cleanly", exit code 0, no process left behind).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable

from coordinator.runtime.local_stack.cluster_profile import BUCKET
from coordinator.runtime.local_stack.ports import free_port
from tests.guarantees.app_runs import CLUSTER_START_BOUND
from tests.up_process import Up

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: Seconds for each part to say it is up: hang signals, not margins. The brokers and the
#: Spark master each give up after 120 s themselves (kafka_cluster.py, spark_cluster.py), the
#: REST ingress after 60 s (cluster_profile.py); the coordinator on the cluster gets the
#: crash tests' bound for a start there (tests/guarantees/app_runs.py: 2-3 times a loaded
#: host's start). Each was 600 s.
PART_BOUNDS = {
    "kafka: three brokers": 240,
    "spark: master": 240,
    "coordinator submitted": CLUSTER_START_BOUND,
    "rest ingress at": 120,
}


def pids_under(folder: Path) -> list[int]:
    """Return the processes whose command line names `folder` (the profile's parts do)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(folder).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.timeout(1200)
def test_the_cluster_profile_comes_up_round_trips_and_stops(tmp_path: Path) -> None:
    state_dir, rest_port = tmp_path / "var", free_port()
    base = f"http://127.0.0.1:{rest_port}"
    up = Up(state_dir, None, rest_port, options=("--cluster",))
    try:
        endpoint = up.wait_for(r"s3 api at (http://\S+),", timeout=120).group(1)
        for part, bound in PART_BOUNDS.items():
            up.wait_for(part, timeout=bound)
        s3 = up.wait_for(r"txcoord cluster is up: .*warehouse (s3a://\S+),", timeout=60)
        assert s3.group(1) == f"s3a://{BUCKET}/warehouse"
        tx = httpx.post(
            f"{base}/v1/transactions",
            json={"producer_group": "orders", "topic": "OrderPaid", "body": "paid"},
            timeout=30,
        ).json()["transaction_id"]
        commit = httpx.post(
            f"{base}/v1/transactions/{tx}/commit", json={"producer_group": "orders"}, timeout=30
        )
        assert commit.status_code == 202, commit.text
        deadline = time.monotonic() + 180
        while (state := httpx.get(f"{base}/v1/transactions/{tx}", timeout=10).json()).get(
            "state"
        ) != "COMMITTED":
            assert time.monotonic() < deadline, (state, "".join(up.output[-30:]))
            time.sleep(1)
        # The message is in the topic's table, in the bucket (read as any S3 client would).
        store = {"AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
                 "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}  # fmt: skip
        topic = DeltaTable(f"s3://{BUCKET}/warehouse/topics/OrderPaid", storage_options=store)
        assert topic.to_pyarrow_table().column("transaction_id").to_pylist() == [tx]
        logs = state_dir / "cluster" / "logs"
        assert (logs / "coordinator.log").is_file() and (logs / "rest.log").is_file()
        assert up.stop(signal.SIGINT) == 0, "".join(up.output[-40:])
        assert "stopped cleanly" in up.text()
    finally:
        if up.process.poll() is None:
            up.stop(signal.SIGKILL)
    assert pids_under(state_dir) == [], "a part of the profile outlived its stop"
