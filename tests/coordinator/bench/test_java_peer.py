"""The Java peer: Kafka's ProducerPerformance runs on the real broker and its output is read.

Fails when the kafka-tools jar is missing or the tool's output cannot be parsed; never
asserts a performance number, only that the figures are there and consistent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coordinator.bench.java_peer import (
    LATENCY,
    Shape,
    batch_duration_ms,
    classpath,
    parse_total,
    run_java_peer,
    run_shape,
)
from coordinator.core.errors import ArtifactsMissingError
from coordinator.runtime.artifacts import jar_cache_dir, jars

# What kafka-tools 4.1.2 printed on this machine (a 5 s window line, then the total).
OUTPUT = """\
1996 records sent, 399.0 records/sec (0.04 MB/sec), 11.3 ms avg latency, 63.0 ms max latency.
3000 records sent, 398.120345 records/sec (0.04 MB/sec), 10.59 ms avg latency, 63.00 ms max \
latency, 8 ms 50th, 30 ms 95th, 38 ms 99th, 41 ms 99.9th.
"""


def test_parse_total_reads_the_closing_line_not_the_window_lines() -> None:
    assert parse_total(OUTPUT) == {
        "records": 3000, "records_per_s": 398.120345, "mb_per_s": 0.04, "avg": 10.59,
        "max": 63.0, "p50": 8.0, "p95": 30.0, "p99": 38.0, "p99_9": 41.0,
    }  # fmt: skip
    with pytest.raises(ValueError, match="no ProducerPerformance summary"):
        parse_total(OUTPUT.splitlines()[0])


def test_batch_duration_aims_at_the_batch_size() -> None:
    assert batch_duration_ms(25.0, 100) == 3  # 50 records/ms: 2 ms of sending + half a tick
    assert batch_duration_ms(500.0, 100) == 1  # never below the tool's minimum
    assert batch_duration_ms(0.0, 100) == 101


def test_a_jar_folder_without_kafka_tools_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kafka").mkdir()
    for name in ("kafka-clients-4.1.2.jar", "kafka-tools-api-4.1.2.jar"):
        (tmp_path / "kafka" / name).write_bytes(b"")
    with pytest.raises(ArtifactsMissingError, match=r"no kafka-tools jar.*make install"):
        classpath(tmp_path)


@pytest.mark.kafka
@pytest.mark.timeout(300)
def test_the_tool_runs_both_shapes_on_the_broker(bootstrap_servers: str, tmp_path: Path) -> None:
    cache = jar_cache_dir(os.environ)  # TXCOORD_JAR_CACHE, as `txcoord bench` reads it
    result = run_java_peer(
        bootstrap_servers,
        tmp_path.name,
        producers=2,
        records=300,
        batch=20,
        work_dir=tmp_path,
        jar_cache=cache,
    )
    assert result["producers"] == 2
    short, batch = result["shapes"]["short"], result["shapes"]["batch"]
    assert short["transaction_duration_ms"] == 1
    assert short["records"] == 600
    for shape in (short, batch):
        assert len(shape["producers"]) == 2
        assert 0 < shape["transactions"] <= shape["records"]
        assert shape["records_per_tx"] == round(shape["records"] / shape["transactions"], 1)
        assert shape["tx_per_s"] > 0
        assert shape["records_per_s"] >= shape["tx_per_s"]
        assert set(shape["latency_ms"]) == set(LATENCY)
        assert all(value is not None and value >= 0 for value in shape["latency_ms"].values())
        assert shape["cpu_seconds"] > 0
        assert shape["peak_rss_bytes"] > 10 * 1024**2  # a JVM's, measured by wait4
    # The batch shape ran as many transactions per producer as the short one, longer ones.
    per_producer = -(-short["transactions"] // 2)
    assert batch["records"] == 2 * 20 * per_producer
    assert batch["transaction_duration_ms"] == batch_duration_ms(short["records_per_tx"], 20)


@pytest.mark.kafka
@pytest.mark.timeout(120)
def test_one_record_per_transaction_is_counted_from_the_commit_markers(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """A long duration with one record: exactly one transaction (the tool's final commit)."""
    cache = jar_cache_dir(os.environ)
    assert any(jar.name.startswith("kafka-tools-4") for jar in jars("kafka", cache))
    shape = run_shape(
        bootstrap_servers,
        tmp_path.name,
        Shape("one", 1, 60_000),
        producers=1,
        work_dir=tmp_path,
        jar_cache=cache,
    )
    assert (shape["records"], shape["transactions"], shape["records_per_tx"]) == (1, 1, 1.0)
