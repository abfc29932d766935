"""What many new topics cost another group's commit→visible, with auto-create on and off.

Each run starts a fresh `txcoord up` (its own state dir, warehouse and free ports) and sends:

- steady: group `steady`, STEADY_RATE committed transactions a second to topic `Steady`
  through the REST ingress (half, then commit), for the whole run;
- sprawl: after BASELINE_SECONDS, group `sprawl` writes one committed transaction to each of
  TOPICS new topics straight to Kafka (as any producer with write access may), at
  SPRAWL_RATE a second.

A steady message's commit→visible is `delivered_at - committed_at` of its row in
`topics/Steady`: the op's store time (the broker's) to the batch that appended the row (the
driver's clock, stamped as that batch's delivery starts). It is reported before, during and
after the sprawl (and how many of each phase were still not visible when the run ended), with
how many topic tables exist at the end, both ways:
`auto_create_topic_enable = true` (every new topic a Delta table created inside the
coordinator's batch) and `false` with `topics = ["Steady"]` (the sprawl's halves are
quarantined as `topic_not_allowed`).

    .venv/bin/python bench/topic_sprawl.py [TOPICS]     # default 1000; ~8 minutes

The result goes to bench/results/topic-sprawl-<UTC time>.json and is printed as a table.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from deltalake import DeltaTable
from kafka import KafkaProducer

from coordinator.protocol.records import half_headers, op_headers

ROOT = Path(__file__).resolve().parents[1]
TXCOORD = str(Path(sys.executable).with_name("txcoord"))
STEADY_RATE = 10.0
SPRAWL_RATE = 20.0
BASELINE_SECONDS = 45.0
AFTER_SECONDS = 45.0
PHASES = ("before", "during", "after")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Stack:
    """A `txcoord up` in a folder of its own."""

    def __init__(self, folder: Path, settings: dict[str, str]) -> None:
        self.folder = folder
        self.port = free_port()
        sets = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
        self.log = (folder / "up.log").open("w")
        self.process = subprocess.Popen(
            [TXCOORD, "up", "--state-dir", str(folder / "var"), "--port", str(self.port),
             "--warehouse", str(folder / "warehouse"), *sets],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=folder,
        )  # fmt: skip
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def wait_running(self, timeout: float = 300.0) -> str:
        """Wait until `txcoord up` says it is up; return the broker's bootstrap servers."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"txcoord up exited: see {self.folder / 'up.log'}")
            found = re.search(
                r"txcoord is up: kafka at (127\.0\.0\.1:\d+)", (self.folder / "up.log").read_text()
            )
            if found:
                return found.group(1)
            time.sleep(1)
        raise SystemExit(f"txcoord up did not start in {timeout:.0f}s")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def steady(endpoint: str, stop: threading.Event, sent: dict[str, float]) -> None:
    """Send committed transactions to Steady at STEADY_RATE until `stop`."""
    with httpx.Client(base_url=endpoint, timeout=30) as client:
        i, start = 0, time.monotonic()
        while not stop.is_set():
            tx = f"steady-{i}"
            half = {"producer_group": "steady", "topic": "Steady", "transaction_id": tx}
            client.post("/v1/transactions", json={**half, "body": "x"}).raise_for_status()
            client.post(
                f"/v1/transactions/{tx}/commit", json={"producer_group": "steady"}
            ).raise_for_status()
            sent[tx] = time.monotonic()
            i += 1
            stop.wait(max(0.0, start + i / STEADY_RATE - time.monotonic()))


def sprawl(bootstrap: str, topics: int) -> None:
    """Write one committed transaction to each of `topics` new topics at SPRAWL_RATE."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    start = time.monotonic()
    for k in range(topics):
        now = int(time.time() * 1000)
        tx = f"sprawl-{k}".encode()
        producer.send(
            "txcoord.half", key=tx, value=b"x", headers=half_headers("sprawl", f"Sprawl{k}", now)
        )
        producer.send(
            "txcoord.op", key=tx, value=b"", headers=op_headers("sprawl", "COMMIT", False, now)
        )
        time.sleep(max(0.0, start + (k + 1) / SPRAWL_RATE - time.monotonic()))
    producer.flush(60)
    producer.close()


def percentiles(values: list[float]) -> dict[str, float]:
    if len(values) < 2:
        return {"count": len(values)}
    cuts = statistics.quantiles(values, n=100)
    return {"count": len(values), "p50": cuts[49], "p95": cuts[94], "p99": cuts[98]}


def run(auto_create: bool, topics: int) -> dict[str, Any]:
    settings = {"auto_create_topic_enable": str(auto_create).lower()}
    if auto_create:  # what the tables cost, not the limits: room for every sprawled topic
        settings["max_topics"] = settings["max_topics_per_group"] = str(topics + 10)
    if not auto_create:
        settings["topics"] = "Steady"
    with tempfile.TemporaryDirectory(prefix="sprawl-") as tmp:
        stack = Stack(Path(tmp), settings)
        try:
            bootstrap = stack.wait_running()
            sent: dict[str, float] = {}
            stop = threading.Event()
            sender = threading.Thread(target=steady, args=(stack.endpoint, stop, sent))
            sender.start()
            time.sleep(BASELINE_SECONDS)
            sprawl_began = time.monotonic()
            sprawl(bootstrap, topics)
            sprawl_ended = time.monotonic()
            time.sleep(AFTER_SECONDS)
            stop.set()
            sender.join()
            time.sleep(15)  # the last steady messages land
            warehouse = Path(tmp) / "warehouse"
            rows = DeltaTable(str(warehouse / "topics" / "Steady")).to_pyarrow_table(
                columns=["transaction_id", "committed_at", "delivered_at"]
            )
            tables = sum(1 for p in (warehouse / "topics").iterdir() if p.is_dir())
            quarantined = DeltaTable(str(warehouse / "system" / "quarantine")).count()
        finally:
            stack.stop()

    def phase_of(at: float) -> str:
        return "before" if at < sprawl_began else "during" if at < sprawl_ended else "after"

    by_phase: dict[str, list[float]] = {phase: [] for phase in PHASES}
    unseen = {phase: 0 for phase in PHASES}
    delivered = {row["transaction_id"]: row for row in rows.to_pylist()}
    for tx, at in sent.items():
        row = delivered.get(tx)
        if row is None:  # committed, and still not in its topic table when the run ended
            unseen[phase_of(at)] += 1
            continue
        latency = (row["delivered_at"] - row["committed_at"]).total_seconds() * 1000
        by_phase[phase_of(at)].append(latency)
    return {
        "auto_create_topic_enable": auto_create,
        "steady_sent": len(sent),
        "steady_delivered": sum(len(v) for v in by_phase.values()),
        "sprawl_seconds": round(sprawl_ended - sprawl_began, 1),
        "topic_tables": tables,
        "quarantined": quarantined,
        "commit_to_visible_ms": {phase: percentiles(v) for phase, v in by_phase.items()},
        "not_visible_at_the_end": unseen,
    }


def main(topics: int) -> None:
    results = [run(True, topics), run(False, topics)]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "bench" / "results" / f"topic-sprawl-{stamp}.json"
    out.write_text(json.dumps({"topics": topics, "runs": results}, indent=2) + "\n")
    print(f"{topics} new topics at {SPRAWL_RATE:.0f}/s beside {STEADY_RATE:.0f} tx/s of group")
    print("steady; steady's commit->visible, ms (p50 / p95 / p99):")
    for result in results:
        cells = []
        for phase in PHASES:
            p = result["commit_to_visible_ms"][phase]
            missing = result["not_visible_at_the_end"][phase]
            cells.append(
                f"{phase} {p.get('p50', 0):.0f}/{p.get('p95', 0):.0f}/{p.get('p99', 0):.0f}"
                + (f" ({missing} never visible)" if missing else "")
            )
        print(
            f"  auto_create_topic_enable={str(result['auto_create_topic_enable']).lower():5}  "
            + "  ".join(cells)
            + f"  topic tables {result['topic_tables']}, quarantined {result['quarantined']}"
        )
    print(f"written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1000)
