"""What a shuffle partition costs: the bench's Kafka path at 1, 2, 4 and 8 partitions, one host.

The coordinator's stateful stage runs in `spark.shuffle_partitions` tasks, each with its own
state store (RocksDB) to load, update and commit every batch. On 2 cores more partitions
cannot run faster; what this measures is what each one costs, so that a cluster can be
sized: an idle batch (the fixed cost, ticks only) and a saturated one (the closed loop),
tx/s, and CPU per decided transaction, per partition count. Each count is a fresh
`txcoord bench` (a checkpoint is made for one partition count: `txcoord state rebuild`
moves one), Kafka path only, no peers, no ceiling:

    .venv/bin/python bench/partition_scaling.py                    # 1,2,4,8; ~15 minutes
    .venv/bin/python bench/partition_scaling.py --partitions 1,2 --count 5000

Writes bench/results/partition-scaling-<UTC time>.json (each run's whole result under
`runs`) and prints the table docs/performance.md shows.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TXCOORD = str(Path(sys.executable).with_name("txcoord"))


def bench_args(partitions: int, count: int, warmup_seconds: float, out: Path) -> list[str]:
    """Return the `txcoord bench` command of one partition count."""
    return [
        TXCOORD, "bench", "--path", "kafka", "--count", str(count), "--warmup", "200",
        "--warmup-max-seconds", str(warmup_seconds), "--idle-seconds", "10",
        "--rest-seconds", "0", "--pending", "none", "--skip-peer", "--skip-java-peer",
        "--skip-ceiling", "--skip-consume", "--set", f"spark.shuffle_partitions={partitions}",
        "--out", str(out),
    ]  # fmt: skip


def row_of(partitions: int, result: dict[str, Any]) -> dict[str, Any]:
    """Return the figures of one run: tx/s, batch times, latency and CPU per transaction."""
    path = result["paths"]["kafka"]
    loaded = path["where_time_went"]["txcoord-coordinator"]["duration_ms_with_rows"]
    idle = result["idle"]["where_time_went"]["txcoord-coordinator"]["duration_ms"]
    cpu = (result.get("cpu_per_transaction") or {}).get("kafka") or {}
    transactions = path["transactions"]
    return {
        "partitions": partitions,
        "sustained_tx_per_s": path["sustained_tx_per_s"],
        "idle_batch_ms": {"p50": idle["p50"], "p95": idle["p95"]},
        "loaded_batch_ms": {"p50": loaded["p50"], "p95": loaded["p95"]},
        "commit_to_visible_ms": {
            "p50": path["commit_to_visible_ms"]["p50"],
            "p99": path["commit_to_visible_ms"]["p99"],
        },
        "cpu_ms_per_transaction": cpu.get("ms"),
        "as_expected": transactions["as_expected"] == transactions["sent"],
    }


def run_one(partitions: int, count: int, warmup_seconds: float) -> dict[str, Any]:
    """Run the bench at `partitions` and return its whole result."""
    with tempfile.TemporaryDirectory(prefix="txcoord-scaling-") as out:
        print(f"shuffle partitions {partitions}: txcoord bench ...", flush=True)
        done = subprocess.run(
            bench_args(partitions, count, warmup_seconds, Path(out)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"txcoord bench failed ({done.returncode}):\n{done.stderr[-3000:]}")
        (found,) = Path(out).glob("bench-*.json")
        result: dict[str, Any] = json.loads(found.read_text())
        return result


def table(rows: list[dict[str, Any]]) -> str:
    """Return the markdown table of `rows`."""
    lines = [
        "| shuffle partitions | tx/s (closed loop) | idle batch ms p50 / p95 | loaded batch ms "
        "p50 / p95 | commit→visible ms p50 / p99 | CPU ms per transaction | all as expected |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['partitions']} | {r['sustained_tx_per_s']:,.0f} "
            f"| {r['idle_batch_ms']['p50']:,.0f} / {r['idle_batch_ms']['p95']:,.0f} "
            f"| {r['loaded_batch_ms']['p50']:,.0f} / {r['loaded_batch_ms']['p95']:,.0f} "
            f"| {r['commit_to_visible_ms']['p50']:,.0f} / {r['commit_to_visible_ms']['p99']:,.0f} "
            f"| {r['cpu_ms_per_transaction']} | {'yes' if r['as_expected'] else 'NO'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="1,2,4,8", help="counts to measure, in order")
    parser.add_argument("--count", type=int, default=30000, help="transactions per run")
    parser.add_argument(
        "--warmup-seconds", type=float, default=90, help="longest JIT warm-up per run"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    counts = [int(p) for p in args.partitions.split(",")]
    started = datetime.now(UTC)
    runs = {p: run_one(p, args.count, args.warmup_seconds) for p in counts}
    rows = [row_of(p, result) for p, result in runs.items()]
    print(table(rows))
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    target = args.out / f"partition-scaling-{stamp}.json"
    document = {
        "started_at": started.isoformat(),
        "count": args.count,
        "warmup_seconds": args.warmup_seconds,
        "rows": rows,
        "runs": {str(p): result for p, result in runs.items()},
    }
    target.write_text(json.dumps(document, indent=1) + "\n")
    print(f"written to {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


if __name__ == "__main__":
    main()
