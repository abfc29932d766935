"""The peer a user would otherwise pick: Kafka's own transactions, on the same broker.

kafka-python's transactional producer, one message per transaction (begin, send, commit),
`producers` of them side by side in one child process (a Kafka transactional producer has
at most one open transaction, so concurrency means several producers, each with its own
transactional id). A `read_committed` consumer in the benchmark's process records when each
message became readable; visibility latency = that time - the return of commit_transaction().
What it does not do, and txcoord does: check back with the producer when the outcome is
unknown, per-queue dense offsets, a queryable table; a Kafka transaction left open is
aborted by the broker after transaction.timeout.ms instead.
"""

from __future__ import annotations

import json
import multiprocessing
import resource
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from coordinator.bench.kafka_driver import now_ms
from coordinator.bench.load import die_with_parent
from coordinator.bench.resources import memory
from coordinator.bench.stats import summarize
from coordinator.kafka_clients.admin import ensure_topic

_SPAWN = multiprocessing.get_context("spawn")


def _produce(
    bootstrap: str,
    topic: str,
    run: str,
    *,
    index: int,
    deadline: float,
    commits: dict[str, int],
    errors: list[str],
) -> None:
    try:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=f"bench-peer-{run}-{index}"
        )
        producer.init_transactions()
        body = b"x" * 100
        number = 0
        # At least one transaction each, however long init_transactions took (seconds of a
        # loaded machine in a short run): a peer that committed nothing has no rate.
        while number == 0 or time.monotonic() < deadline:
            key = f"{run}-{index}-{number}"
            producer.begin_transaction()
            producer.send(topic, key=key.encode(), value=body)
            producer.commit_transaction()
            commits[key] = now_ms()
            number += 1
        producer.close(timeout=10)
    except Exception as exc:
        errors.append(f"producer {index}: {exc}\n{traceback.format_exc()}")


def run_producers(
    bootstrap: str, topic: str, run: str, *, producers: int, seconds: float, out_file: str
) -> None:
    """Child process: run `producers` transactional producers for `seconds`; write results."""
    die_with_parent()
    commits: dict[str, int] = {}
    errors: list[str] = []
    deadline = time.monotonic() + seconds
    started = now_ms()
    threads = [
        threading.Thread(
            target=_produce,
            args=(bootstrap, topic, run),
            kwargs={"index": i, "deadline": deadline, "commits": commits, "errors": errors},
        )
        for i in range(producers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(out_file).write_text(
        json.dumps(
            {
                "commits": commits,
                "errors": errors,
                "started_ms": started,
                "finished_ms": now_ms(),
                "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
                "peak_rss_bytes": memory()[1],
            }
        )
    )


class _Reader(threading.Thread):
    """A read_committed consumer that notes when each key became readable."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="bench-peer-reader", daemon=True)
        self.seen: dict[str, int] = {}
        self.stop = threading.Event()
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            fetch_max_wait_ms=100,
        )

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for records in self.consumer.poll(timeout_ms=100).values():
                    at = now_ms()
                    for record in records:
                        self.seen.setdefault(record.key.decode(), at)
        finally:
            self.consumer.close()


def run_peer(
    bootstrap: str, topic: str, run: str, *, producers: int, seconds: float, work_dir: Path
) -> dict[str, Any]:
    """Measure the peer: transactions/s and commit-to-readable latency."""
    ensure_topic(bootstrap, topic, partitions=4)
    reader = _Reader(bootstrap, topic)
    reader.start()
    out_file = work_dir / f"peer-{run}.json"
    child = _SPAWN.Process(
        target=run_producers,
        name="bench-peer",
        args=(bootstrap, topic, run),
        kwargs={"producers": producers, "seconds": seconds, "out_file": str(out_file)},
    )
    child.start()
    child.join(seconds + 120)
    if child.is_alive():
        child.kill()
        raise RuntimeError("the peer producers did not finish in time")
    result = json.loads(out_file.read_text())
    commits: dict[str, int] = result["commits"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not commits.keys() <= reader.seen.keys():
        time.sleep(0.1)
    reader.stop.set()
    reader.join(10)
    if result["errors"]:
        raise RuntimeError(f"the peer failed: {result['errors'][0]}")
    wall = (max(commits.values(), default=result["started_ms"]) - result["started_ms"]) / 1000
    latencies = [float(reader.seen[k] - at) for k, at in commits.items() if k in reader.seen]
    return {
        "what": f"kafka-python {producers} transactional producer(s), one message per "
        "transaction (begin, send, commit), read_committed consumer",
        "producers": producers,
        "transactions": len(commits),
        "seconds": round(wall, 2),
        "tx_per_s": round(len(commits) / wall, 1) if wall > 0 else None,
        "visible_latency_ms": summarize(latencies),
        "not_seen_by_consumer": len(commits) - len(latencies),
        "load_cpu_seconds": result["cpu_seconds"],
        "load_peak_rss_bytes": result["peak_rss_bytes"],
    }
