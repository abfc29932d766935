"""contract 7.7, acknowledged means durable: kill -9 the REST process under load, restart it.

The REST runs as its own process (`python -m coordinator.rest`), as in production. Several
threads send halves and commit them, one op at a time or (as the SDK sends check answers)
several in one `POST /v1/ops/batch`; the process is killed with SIGKILL mid-way and started
again while they keep sending. Every half that got a 201 must be in the half topic, and
every op that got a 202 (or a 202 item in a batch) in the op topic, at exactly the partition
and offset its answer named (an op's id is its position). Both topic layouts: shared, and
per group (the ingress creates the group's own topics, contract 5.2).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from coordinator.core.config import Config, load_config
from coordinator.kafka_clients.admin import delete_topic
from coordinator.protocol import ingress as fmt
from tests.coordinator.rest.conftest import drop_topics
from tests.coordinator.rest.kafka_io import read_all

pytestmark = [pytest.mark.kafka, pytest.mark.long]

REPO = Path(__file__).parents[3]
SENDERS = 4
PER_PHASE = 300
#: Ops in one batch of a batching sender.
OPS_BATCH = 8


def start(config_file: Path, log: IO[bytes], base_url: str) -> subprocess.Popen[bytes]:
    """Start `python -m coordinator.rest` and return once it answers /healthz."""
    process = subprocess.Popen(
        [sys.executable, "-m", "coordinator.rest", "--config", str(config_file)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the REST process exited with {process.returncode}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    process.kill()
    raise AssertionError("the REST process did not answer /healthz within 90 s")


class Sender(threading.Thread):
    """Send halves until stopped; keep what was acknowledged, count what failed."""

    def __init__(
        self, name: str, base_url: str, stop: threading.Event, batched: bool = False
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.base_url = base_url
        #: Commits in batches of OPS_BATCH ops (the SDK's check answers), not one by one.
        self.batched = batched
        self._uncommitted: list[str] = []
        self.stop = stop
        self.acked: list[tuple[str, int, int]] = []
        self.acked_ops: list[tuple[str, str]] = []  # (transaction id, op id)
        self.failures = 0
        self.unexpected: list[str] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=15) as client:
            number = 0
            while not self.stop.is_set():
                number += 1
                tx = f"{self.name}-{number}"
                body = {
                    "producer_group": "orders",
                    "topic": "OrderPaid",
                    "transaction_id": tx,
                    "body": f"payload {tx}",
                    "keys": [tx],
                }
                try:
                    answer = client.post("/v1/transactions", json=body)
                except httpx.TransportError:
                    self.failures += 1  # not acknowledged: nothing is promised
                    time.sleep(0.05)
                    continue
                if answer.status_code != 201:
                    self.unexpected.append(f"{answer.status_code} {answer.text}")
                    continue
                sent = answer.json()
                self.acked.append((tx, sent["partition"], sent["offset"]))
                if not self.batched:
                    self.commit(client, tx)
                    continue
                self._uncommitted.append(tx)
                if len(self._uncommitted) >= OPS_BATCH:
                    self.commit_batch(client)

    def commit_batch(self, client: httpx.Client) -> None:
        """Commit what waits in one POST /v1/ops/batch; keep each 202 item's op id."""
        items = [{"transaction_id": tx, "op": "COMMIT", "producer_group": "orders",
                  "from_check": True} for tx in self._uncommitted]  # fmt: skip
        self._uncommitted = []
        try:
            answer = client.post("/v1/ops/batch", json={"ops": items})
        except httpx.TransportError:
            self.failures += 1
            return
        if answer.status_code not in (202, 207):
            self.unexpected.append(f"{answer.status_code} {answer.text}")
            return
        for item in answer.json()["results"]:
            if item["status"] == 202:
                self.acked_ops.append((item["transaction_id"], item["result"]["op_id"]))
            elif item["status"] != 503:  # Kafka away a moment: not acknowledged, fine
                self.unexpected.append(f"{item}")

    def commit(self, client: httpx.Client, tx: str) -> None:
        """Commit `tx`; keep the op's id if acknowledged (202)."""
        try:
            answer = client.post(f"/v1/transactions/{tx}/commit", json={"producer_group": "orders"})
        except httpx.TransportError:
            self.failures += 1
            return
        if answer.status_code == 202:
            self.acked_ops.append((tx, answer.json()["op_id"]))
        else:
            self.unexpected.append(f"{answer.status_code} {answer.text}")


def acked(senders: list[Sender]) -> int:
    return sum(len(s.acked) for s in senders)


def failures(senders: list[Sender]) -> int:
    return sum(s.failures for s in senders)


def wait_for(senders: list[Sender], count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while acked(senders) < count:
        assert time.monotonic() < deadline, f"only {acked(senders)} of {count} acknowledged"
        time.sleep(0.05)


@pytest.fixture(params=[False, True], ids=["shared", "per-group"])
def config_file(
    bootstrap_servers: str, tmp_path: Path, free_port: int, request: pytest.FixtureRequest
) -> Any:
    suffix = uuid.uuid4().hex[:8]
    path = tmp_path / "txcoord.toml"
    path.write_text(
        f'warehouse = "{tmp_path / "warehouse"}"\n'
        f'[kafka]\nbootstrap_servers = "{bootstrap_servers}"\nhalf_topic = "half-{suffix}"\n'
        f'op_topic = "op-{suffix}"\ncheck_topic = "check-{suffix}"\npartitions = 3\n'
        f"topics_per_group = {str(request.param).lower()}\n"
        f"[rest]\nport = {free_port}\n"
    )
    config: Config = load_config(path)
    try:
        yield path, config
    finally:
        drop_topics(config)
        if config.kafka.topics_per_group:
            for topic in (config.kafka.layout.half_topic("orders"),
                          config.kafka.layout.op_topic("orders")):  # fmt: skip
                delete_topic(config.kafka.bootstrap_servers, topic)


def test_every_acknowledged_half_and_op_survives_a_kill_9(
    config_file: tuple[Path, Config], tmp_path: Path
) -> None:
    path, config = config_file
    layout = config.kafka.layout
    base_url = f"http://127.0.0.1:{config.rest.port}"
    stop = threading.Event()
    # Half of them answer as the SDK's check loop does: several ops in one batch.
    senders = [Sender(f"s{i}", base_url, stop, batched=i % 2 == 1) for i in range(SENDERS)]
    with (tmp_path / "rest.log").open("wb") as log:
        process = start(path, log, base_url)  # creates the ingress topics itself
        try:
            for sender in senders:
                sender.start()
            wait_for(senders, PER_PHASE)
            process.send_signal(signal.SIGKILL)  # mid-way, with requests in flight
            process.wait(10)
            at_kill = acked(senders)
            failures_before = failures(senders)
            # Positive marker: a sender's request failed against the dead process.
            deadline = time.monotonic() + 60
            while failures(senders) == failures_before:
                assert time.monotonic() < deadline, "nobody saw the crash"
                time.sleep(0.05)

            process = start(path, log, base_url)
            wait_for(senders, at_kill + PER_PHASE)
        finally:
            stop.set()
            for sender in senders:
                sender.join(30)
            process.send_signal(signal.SIGTERM)
            returncode = process.wait(30)
    # uvicorn shuts down cleanly, then re-raises the signal it caught (exit status -15).
    log_text = (tmp_path / "rest.log").read_text()
    assert returncode in (0, -signal.SIGTERM), log_text
    assert log_text.count("Application shutdown complete") == 1, log_text
    assert [u for s in senders for u in s.unexpected] == []

    stored = {
        (r.partition, r.offset): r.key.decode()
        for r in read_all(config.kafka.bootstrap_servers, layout.half_topic("orders"))
    }
    promised = [entry for s in senders for entry in s.acked]
    assert len(promised) >= 2 * PER_PHASE
    lost = [(tx, p, o) for tx, p, o in promised if stored.get((p, o)) != tx]
    assert lost == [], f"{len(lost)} acknowledged halves are missing or misplaced"
    assert len(set(stored.values())) >= len(promised)

    ops_stored = {
        fmt.op_id_of(r.partition, r.offset): r.key.decode()
        for r in read_all(config.kafka.bootstrap_servers, layout.op_topic("orders"))
    }
    promised_ops = [entry for s in senders for entry in s.acked_ops]
    assert len(promised_ops) >= PER_PHASE
    batched = {entry for s in senders if s.batched for entry in s.acked_ops}
    assert len(batched) >= PER_PHASE // 4, "the batching senders got few ops acknowledged"
    lost_ops = [(tx, op_id) for tx, op_id in promised_ops if ops_stored.get(op_id) != tx]
    assert lost_ops == [], f"{len(lost_ops)} acknowledged ops are missing or misplaced"
