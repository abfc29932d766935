"""bench/partition_scaling.py: a row per partition count, from the numbers the bench wrote."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bench_scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
#: A committed run with an idle phase and the Kafka path (its partitions were 2).
MEASURED = ROOT / "bench" / "results" / "bench-20261129T085620Z.json"


def test_a_run_gives_its_rates_batches_latency_and_cpu() -> None:
    script = load_script("partition_scaling")
    result = json.loads(MEASURED.read_text())
    result["cpu_per_transaction"] = {"kafka": {"ms": 0.75}}  # written by newer benches
    row = script.row_of(2, result)
    assert row == {
        "partitions": 2,
        "sustained_tx_per_s": 99.6,
        "idle_batch_ms": {"p50": 192.0, "p95": 716.0},
        "loaded_batch_ms": {"p50": 300.0, "p95": 432.0},
        "commit_to_visible_ms": {"p50": 726.0, "p99": 1226.0},
        "cpu_ms_per_transaction": 0.75,
        "as_expected": True,
    }
    lines = script.table([row, {**row, "partitions": 8, "as_expected": False}]).splitlines()
    assert len(lines) == 4
    assert lines[2] == "| 2 | 100 | 192 / 716 | 300 / 432 | 726 / 1,226 | 0.75 | yes |"
    assert lines[3].startswith("| 8 |") and lines[3].endswith("| NO |")


def test_each_count_runs_the_bench_with_its_partitions(tmp_path: Path) -> None:
    args = load_script("partition_scaling").bench_args(4, 1000, 30.0, tmp_path)
    assert args[1] == "bench" and "spark.shuffle_partitions=4" in args
    assert args[args.index("--count") + 1] == "1000" and args[args.index("--out") + 1] == str(
        tmp_path
    )
