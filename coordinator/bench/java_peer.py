"""The peer a Java shop would pick: Kafka's own ProducerPerformance, transactional.

`org.apache.kafka.tools.ProducerPerformance` (kafka-tools, the same version as the broker,
resolved by the install step into the broker's jar folder) with `--transactional-id`: the
Java client's transactional producer, default producer settings, 100-byte records,
unthrottled (`--throughput -1`). `producers` of them run side by side, one JVM each (the
tool drives one producer), each on a one-partition topic of its own.

How the tool forms transactions (its main loop, Kafka 4.1): `beginTransaction()` right
before a transaction's first `send()`, then `commitTransaction()` after the first send that
starts at least `--transaction-duration-ms` (> 0, wall-clock ms) after the begin. So a
transaction never holds exactly one record except by chance (a millisecond tick between
begin and the first send): it holds every record sent in the rest of the begin's millisecond
and one more. Two shapes:

short  `--transaction-duration-ms 1`: the smallest transactions the tool makes at full
       speed; the closest it gets to one message per transaction.
batch  a duration chosen from the short shape's records per transaction so that a
       transaction holds about `batch` records; as many transactions per producer as the
       short shape ran, so both shapes take about as long.

The tool prints records, not transactions. Each committed transaction writes one commit
marker into its partition, one offset; so transactions = log end offset - records, read once
the last stable offset has caught up with the log end (the last marker is written).
Latency, as the tool prints it: per record, from just before send() to its acknowledgement
(the record is in the partition's log, not yet readable by a read_committed consumer).
"""

from __future__ import annotations

import logging
import math
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from coordinator.bench.resources import memory
from coordinator.bench.stats import median
from coordinator.core.errors import ArtifactsMissingError
from coordinator.kafka_clients.admin import ensure_topic
from coordinator.runtime.artifacts import jars

log = logging.getLogger(__name__)

TOOL = "org.apache.kafka.tools.ProducerPerformance"
RECORD_SIZE = 100  # bytes, as the kafka-python peer's messages
#: The tool's closing line (Stats.printTotal), e.g. "3000 records sent, 898.505525
#: records/sec (0.09 MB/sec), 17.59 ms avg latency, 132.00 ms max latency, 13 ms 50th,
#: 36 ms 95th, 39 ms 99th, 53 ms 99.9th."
_TOTAL = re.compile(
    r"^(?P<records>\d+) records sent, (?P<records_per_s>[\d.]+) records/sec "
    r"\((?P<mb_per_s>[\d.]+) MB/sec\), (?P<avg>[\d.]+) ms avg latency, "
    r"(?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, "
    r"(?P<p99>\d+) ms 99th, (?P<p99_9>\d+) ms 99\.9th\.$",
    re.MULTILINE,
)
#: The shapes the tool runs in, in the order the report shows them.
SHAPES = ("short", "batch")
#: The latency figures the tool prints, in its order.
LATENCY = ("avg", "p50", "p95", "p99", "p99_9", "max")


def parse_total(stdout: str) -> dict[str, float]:
    """Return the figures of the tool's closing line; raise ValueError when it is missing."""
    found = _TOTAL.findall(stdout)
    if not found:
        raise ValueError(f"no ProducerPerformance summary line in its output:\n{stdout[-2000:]}")
    fields = dict(zip(_TOTAL.groupindex, found[-1], strict=True))
    return {
        name: (int(value) if name == "records" else float(value)) for name, value in fields.items()
    }


def classpath(jar_cache: Path | None) -> str:
    """Return the tool's classpath: the broker's jars, which must include kafka-tools."""
    found = jars("kafka", jar_cache)
    if not any(re.fullmatch(r"kafka-tools-[\d.]+\.jar", jar.name) for jar in found):
        raise ArtifactsMissingError(
            f"no kafka-tools jar (ProducerPerformance) among the {len(found)} jars in "
            f"{found[0].parent}: run `make install` once more (deploy/jvm/kafka-broker.pom.xml "
            "lists it; the install step re-resolves when that file changes)"
        )
    return os.pathsep.join(str(jar) for jar in found)


@dataclass(frozen=True)
class Shape:
    """One way of running the tool: its name, records per producer, transaction length."""

    name: str
    records: int
    duration_ms: int


def batch_duration_ms(records_per_tx_at_1ms: float, batch: int) -> int:
    """Return the --transaction-duration-ms that gives about `batch` records a transaction.

    At 1 ms a transaction lasts from its begin to the next millisecond tick, half a
    millisecond on average, so the sending rate is about 2 x records_per_tx_at_1ms per ms;
    a duration of d ms lasts d - 0.5 ms on average.
    """
    per_ms = 2 * max(records_per_tx_at_1ms, 0.5)
    return max(1, math.floor(batch / per_ms + 0.5 + 0.5))  # d - 0.5, rounded half up


def _command(java: str, cp: str, bootstrap: str, topic: str, shape: Shape) -> list[str]:
    """Return the tool's command line; the topic's name (unique per run) is the transactional id."""
    command = [
        java, "-Xms256m", "-Xmx512m", "-Duser.language=en", "-Duser.country=US",
        "-cp", cp, TOOL,
        "--topic", topic, "--num-records", str(shape.records),
        "--record-size", str(RECORD_SIZE), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}",
        "--transactional-id", topic,
        "--transaction-duration-ms", str(shape.duration_ms),
    ]  # fmt: skip
    setpriv = shutil.which("setpriv")  # the JVM goes with the bench, even on kill -9
    return [setpriv, "--pdeathsig", "TERM", *command] if setpriv else command


def _wait(process: subprocess.Popen[bytes], deadline: float) -> tuple[int, float, int]:
    """Wait for `process`; return (exit code, CPU seconds, peak RSS bytes).

    CPU from wait4; the peak from VmHWM, read while the JVM runs (wait4's ru_maxrss would
    carry this process's own peak from the fork: see resources.memory).
    """
    peak = 0
    while True:
        peak = max(peak, memory(process.pid)[1])
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, round(usage.ru_utime + usage.ru_stime, 2), peak
        if time.monotonic() > deadline:
            process.kill()
            process.wait()
            raise RuntimeError(f"{TOOL} (pid {process.pid}) did not finish in time")
        time.sleep(0.1)


def count_transactions(bootstrap: str, topic: str, records: int, timeout: float = 30.0) -> int:
    """Return the committed transactions in `topic` (one partition): its commit markers."""
    partition = TopicPartition(topic, 0)
    committed = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    everything = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + timeout
        while True:
            end = everything.end_offsets([partition])[partition]
            stable = committed.end_offsets([partition])[partition]
            if stable == end:  # no open transaction: the last commit marker is written
                return int(end) - records
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: last stable offset {stable} < log end {end}")
            time.sleep(0.1)
    finally:
        committed.close()
        everything.close()


def _producer(total: dict[str, float], transactions: int, cpu: float, rss: int) -> dict[str, Any]:
    records = int(total["records"])
    seconds = records / total["records_per_s"] if total["records_per_s"] else 0.0
    return {
        "records": records,
        "transactions": transactions,
        "seconds": round(seconds, 2),
        "records_per_s": round(total["records_per_s"], 1),
        "tx_per_s": round(transactions / seconds, 1) if seconds else None,
        "latency_ms": {name: total[name] for name in LATENCY},
        "cpu_seconds": cpu,
        "peak_rss_bytes": rss,
    }


def run_shape(
    bootstrap: str,
    run: str,
    shape: Shape,
    *,
    producers: int,
    work_dir: Path,
    jar_cache: Path | None,
    timeout: float = 900.0,
) -> dict[str, Any]:
    """Run `producers` tools side by side in `shape`; return their sums and each one's figures."""
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH; the Java peer needs Java 17 or newer")
    cp = classpath(jar_cache)
    work_dir.mkdir(parents=True, exist_ok=True)
    topics = [f"bench.javapeer.{run}.{shape.name}.{i}" for i in range(producers)]
    for topic in topics:
        ensure_topic(bootstrap, topic, partitions=1)
    started, outputs = [], []
    try:
        for i, topic in enumerate(topics):
            out = work_dir / f"java-peer-{shape.name}-{i}.out"
            with out.open("wb") as stdout:
                command = _command(java, cp, bootstrap, topic, shape)
                started.append(subprocess.Popen(command, stdout=stdout, stderr=subprocess.STDOUT))
            outputs.append(out)
        deadline = time.monotonic() + timeout
        ended = [_wait(process, deadline) for process in started]
    finally:
        for process in started:
            if process.returncode is None:
                process.kill()
                process.wait()
    each = []
    for topic, out, (code, cpu, rss) in zip(topics, outputs, ended, strict=True):
        text = out.read_text(errors="replace")
        if code != 0:
            raise RuntimeError(f"{TOOL} exited with {code}:\n{text[-3000:]}")
        total = parse_total(text)
        if total["records"] != shape.records:  # a failed send is printed, not counted
            raise RuntimeError(
                f"{TOOL}: {total['records']} of {shape.records} records acked:\n{text[-3000:]}"
            )
        transactions = count_transactions(bootstrap, topic, int(total["records"]))
        each.append(_producer(total, transactions, cpu, rss))
    return _sums(shape, each)


def _sums(shape: Shape, each: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum the side-by-side producers' rates; the latency figures as each printed them."""
    records = sum(p["records"] for p in each)
    transactions = sum(p["transactions"] for p in each)
    # Exact for the mean (record-weighted) and the max; a percentile of the union cannot be
    # rebuilt from each producer's, so the middle producer's figure stands for it.
    latency: dict[str, float | None] = {
        "avg": round(sum(p["latency_ms"]["avg"] * p["records"] for p in each) / records, 2),
        **{name: median([p["latency_ms"][name] for p in each]) for name in LATENCY[1:-1]},
        "max": max(p["latency_ms"]["max"] for p in each),
    }
    return {
        "transaction_duration_ms": shape.duration_ms,
        "records": records,
        "transactions": transactions,
        "records_per_tx": round(records / transactions, 1) if transactions else None,
        "seconds": max(p["seconds"] for p in each),
        "tx_per_s": round(sum(p["tx_per_s"] or 0 for p in each), 1),
        "records_per_s": round(sum(p["records_per_s"] for p in each), 1),
        "latency_ms": latency,
        "cpu_seconds": round(sum(p["cpu_seconds"] for p in each), 2),
        "peak_rss_bytes": max(p["peak_rss_bytes"] for p in each),
        "producers": each,
    }


#: What the tool prints when the broker fences a transaction it began a moment after the last
#: commit (seen on a loaded 2-core machine, Kafka 4.1.2): the peer's failure, not ours.
FENCED = "InvalidTxnStateException"


def _run_shape_once_more(bootstrap: str, run: str, shape: Shape, **common: Any) -> dict[str, Any]:
    """Run the shape; if the broker refused a transaction of the tool (FENCED), run it once
    more on fresh topics, and say so in the result (`retried`)."""
    try:
        return run_shape(bootstrap, run, shape, **common)
    except RuntimeError as exc:
        if FENCED not in str(exc):
            raise
        log.warning("%s failed with %s; running the %s shape once more", TOOL, FENCED, shape.name)
        return {
            **run_shape(bootstrap, f"{run}-again", shape, **common),
            "retried": f"the first run failed: {FENCED}",
        }


def run_java_peer(
    bootstrap: str,
    run: str,
    *,
    producers: int,
    records: int,
    batch: int,
    work_dir: Path,
    jar_cache: Path | None,
) -> dict[str, Any]:
    """Measure ProducerPerformance in the short shape, then the batch shape."""
    common: dict[str, Any] = {"producers": producers, "work_dir": work_dir, "jar_cache": jar_cache}
    short = _run_shape_once_more(bootstrap, run, Shape(SHAPES[0], records, 1), **common)
    duration = batch_duration_ms(short["records_per_tx"] or 1.0, batch)
    per_producer = max(-(-short["transactions"] // producers), 1)  # ceil
    batched = _run_shape_once_more(
        bootstrap, run, Shape(SHAPES[1], batch * per_producer, duration), **common
    )
    return {
        "what": f"Kafka's ProducerPerformance (Java client), {producers} transactional "
        f"producer(s) side by side, {RECORD_SIZE}-byte records, unthrottled",
        "producers": producers,
        "batch_target_records_per_tx": batch,
        "shapes": dict(zip(SHAPES, (short, batched), strict=True)),
    }
