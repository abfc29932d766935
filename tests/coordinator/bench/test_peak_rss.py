"""A child's peak RSS is its own, not the benchmark process's at the moment it was forked.

Linux carries a process's high-water RSS across fork and exec into the child's
`getrusage(RUSAGE_SELF).ru_maxrss` (and `wait4`'s), so a 60 MB load process forked from a
2 GB bench process reported 2 GB. VmHWM in /proc/<pid>/status belongs to the process's
current memory map and starts afresh at exec.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.bench.java_peer import Shape, run_shape
from coordinator.bench.peer import run_peer
from coordinator.runtime.artifacts import jar_cache_dir

BALLAST = 1536 * 1024**2  # more than a kafka-python process or a 512 MB-heap JVM reaches


@pytest.fixture
def ballast() -> Iterator[bytearray]:
    """Make this (the parent) process's resident set BALLAST bytes bigger."""
    block = bytearray(BALLAST)
    for at in range(0, BALLAST, 4096):
        block[at] = 1
    yield block


@pytest.mark.kafka
@pytest.mark.timeout(180)
def test_the_python_peer_reports_its_own_peak(
    bootstrap_servers: str, tmp_path: Path, ballast: bytearray
) -> None:
    # The peer's seconds include its producer's start (init_transactions: ~0.5 s idle, more
    # on a loaded machine), and it must commit at least one transaction after that.
    result = run_peer(
        bootstrap_servers,
        f"rss.{tmp_path.name}",
        tmp_path.name,
        producers=1,
        seconds=5,
        work_dir=tmp_path,
    )
    assert result["transactions"] > 0
    assert 0 < result["load_peak_rss_bytes"] < BALLAST


@pytest.mark.kafka
@pytest.mark.timeout(180)
def test_the_java_peer_reports_its_own_peak(
    bootstrap_servers: str, tmp_path: Path, ballast: bytearray
) -> None:
    shape = run_shape(
        bootstrap_servers,
        tmp_path.name,
        Shape("rss", 50, 1),
        producers=1,
        work_dir=tmp_path,
        jar_cache=jar_cache_dir(os.environ),
    )
    assert 10 * 1024**2 < shape["peak_rss_bytes"] < BALLAST
