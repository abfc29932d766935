"""`txcoord bench` runs end to end with tiny settings and writes a well-formed result.

A smoke test only: it checks the result's shape and that every transaction it sent was
decided as its kind expects; it never asserts a performance number.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator.bench.resources import BENCH, BROKER, LOAD, SPARK, WORKERS
from coordinator.runtime.artifacts import PROJECT_ROOT
from tests.conftest import unavailable

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

SUMMARY = ("count", "p50", "p95", "p99", "min", "max", "mean")


def _is_summary(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == set(SUMMARY)


def _check_references(result: dict[str, Any]) -> None:
    """The ceiling, both peers and the ratios to each are there and sensible."""
    assert result["ceiling"]["repeats"][0]["rows"] == 2000
    assert result["ceiling"]["rows_per_s_median"] > 0
    assert result["peer"]["transactions"] > 0
    assert result["peer"]["not_seen_by_consumer"] == 0
    assert _is_summary(result["peer"]["visible_latency_ms"])
    for shape in result["java_peer"]["shapes"].values():
        assert shape["tx_per_s"] > 0
        assert shape["records"] >= shape["transactions"] > 0
    assert result["java_peer"]["shapes"]["short"]["records"] == 2 * 200
    for ratios in result["ratios"].values():
        assert set(ratios) == {
            "sustained_tx_per_s",
            "ours_over_peer",
            "ours_over_ceiling",
            "ours_over_java_short",
            "ours_over_java_short_records",
            "ours_over_java_batch",
            "ours_over_java_batch_records",
        }
        assert all(value > 0 for value in ratios.values())


def _check_cpu_per_transaction(result: dict[str, Any]) -> None:
    """The issue-13 figure, from the same phases: every path's CPU per decided transaction,
    the Spark JVM's part of it, and the same CPU in the Java peer's records."""
    assert set(result["cpu_per_transaction"]) == {"kafka", "rest", "grpc"}
    for path, cost in result["cpu_per_transaction"].items():
        phase = result["resources"]["phases"][f"{path} path"]["processes"]
        decided = result["paths"][path]["transactions"]["decided"]
        assert cost["by_process"][SPARK] == round(1000 * phase[SPARK]["cpu_seconds"] / decided, 3)
        assert cost["ms"] >= cost["by_process"][SPARK] > 0
        assert cost["java_short_us_per_record"] > 0 and cost["in_java_records"] > 0


def _check_path(path: dict[str, Any]) -> None:
    """Every transaction of the path was decided as its kind says, and each figure is there."""
    sent = path["transactions"]
    assert sent["sent"] == 200
    assert sent["as_expected"] == 200, sent  # every transaction decided, as its kind says
    assert sent["undecided"] == sent["wrong"] == 0
    assert set(sent["by_kind"]) == {
        "commit",
        "rollback",
        "checked-commit",
        "checked-rollback",
        "rechecked-commit",
    }
    assert sent["by_kind"]["rechecked-commit"]["sent"] == 4  # 2% of 200
    assert path["visible_rolled_back"] == 0
    assert path["commit_to_visible_ms"]["count"] == sent["by_kind"]["commit"]["sent"]
    # Checked and rechecked commits, each from its COMMIT answer (8 + 4).
    assert path["checked_commit_to_visible_ms"]["count"] == 12
    assert path["check_timeliness_ms"]["recorded"]["count"] >= 20
    # Every rechecked transaction's second check, as recorded and as received.
    later = path["later_check_timeliness_ms"]
    assert later["recorded"]["count"] >= 4
    assert later["received_by_producer"]["count"] >= 4
    for key in ("commit_to_visible_ms", "checked_commit_to_visible_ms"):
        assert _is_summary(path[key])
    assert all(_is_summary(summary) for summary in later.values())
    for key in ("offered_tx_per_s", "end_to_end_tx_per_s"):
        assert isinstance(path[key], float) and path[key] > 0
    assert "txcoord-coordinator" in path["where_time_went"]
    assert path["series"]


def _check_grpc(result: dict[str, Any]) -> None:
    """The gRPC path ran RocketMQ's Java client: its own latencies, its checker's answers (no
    check of a kind that had decided), its JVM's CPU among the load processes."""
    grpc = result["paths"]["grpc"]
    assert grpc["senders"] > 0
    latency = grpc["client_latency_ms"]
    assert latency["send"]["count"] == 200
    assert latency["end"]["count"] == 180  # commit and rollback kinds; the checker ends the rest
    assert grpc["responder"]["checks_received"] >= 24  # 20 first checks, 4 second ones
    assert grpc["responder"]["unexpected_checks"] == 0
    assert grpc["load_process"]["cpu_seconds"] > 0
    assert grpc["load_process"]["peak_rss_bytes"] > 0
    phase = result["resources"]["phases"]["grpc path"]["processes"]
    # The phase reads the reaped JVM's CPU from /proc in clock ticks, the load from wait4.
    assert phase[LOAD]["cpu_seconds"] >= grpc["load_process"]["cpu_seconds"] - 0.1, phase
    assert any("grpc path: RocketMQ's own Java client" in note for note in result["notes"])


@pytest.mark.timeout(900)
def test_bench_runs_every_path_and_the_references(tmp_path: Path) -> None:
    if shutil.which("java") is None:
        unavailable("the benchmark", RuntimeError("java is not on PATH"))
    out = tmp_path / "results"
    command = [
        sys.executable, "-m", "coordinator", "bench",
        "--count", "200", "--path", "both", "--path", "grpc", "--window", "1000", "--batch", "50",
        "--warmup", "20", "--warmup-max-seconds", "3", "--idle-seconds", "2", "--rest-seconds", "1",
        "--check-interval", "3s",  # rechecked transactions decide sooner
        "--pending", "1000", "--pending-window", "4", "--pending-rate", "20",
        "--peer-seconds", "3", "--peer-producers", "2",
        "--java-peer-records", "200", "--java-peer-batch", "20",
        "--ceiling-records", "2000", "--ceiling-repeats", "1",
        "--consume-seconds", "4",
        "--drain-timeout", "300", "--driver-memory", "1g",
        "--state-dir", str(tmp_path / "state"), "--out", str(out),
    ]  # fmt: skip
    run = subprocess.run(
        command, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=880, check=False
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]

    [result_file] = out.glob("bench-*.json")
    assert result_file.with_suffix(".md").exists()
    assert result_file.with_suffix(".png").exists()
    result = json.loads(result_file.read_text())
    assert result["schema"] == "txcoord-bench/1"
    assert result["configuration"]["transaction_timeout_s"] == 2.0
    assert result["configuration"]["transaction_check_interval_s"] == 3.0

    assert result["warmup"]["decided"] >= 20
    # A fresh JVM compiles under load; 3 s cannot show a settled 30 s window.
    assert result["warmup"]["jit_compile_seconds"] > 0
    assert result["warmup"]["jit_settled"] is False
    phases = result["resources"]["phases"]
    assert all(phase["jit_compile_seconds"] >= 0 for phase in phases.values()), phases
    assert result["idle"]["seconds"] == 2
    # The ticker rested after the warm-up's timers: the horizon (orphan wait 2 T + 10 s)
    # and its margin after the last batch that acted, within the bench's own bound (60 s
    # more, or it fails the run). How soon is a figure: on a loaded machine the timers'
    # batches come late, each putting the rest further off (tick_pace's rule itself is
    # tests/streams/kafka_io/test_tick_pace.py's).
    assert result["resting"]["seconds"] == 1
    assert 0 < result["resting"]["waited_seconds"] <= 14 + 5 + 60
    assert list(result["paths"]) == ["kafka", "rest", "grpc"]
    for path in result["paths"].values():
        _check_path(path)
    _check_grpc(result)

    levels = result["pending"]["levels"]
    assert [level["pending"] for level in levels] == [1000]
    assert levels[0]["steady_transactions"] > 0
    assert levels[0]["state_rows_median"] >= 1000
    assert levels[0]["coordinator_batch_ms"]["count"] > 0
    # The state rebuilt both ways holds the pending level and the steady load's decisions.
    rebuilt = levels[0]["rebuild"]
    for source in ("checkpoint", "warehouse"):
        assert rebuilt[source]["transactions"] >= 1000 and rebuilt[source]["seconds"] > 0
    assert result["delta_commits"]["tables"]["system/half_messages"] > 0

    # Commit→consumed beside commit→visible, for the same commits: every one consumed. The
    # phase is timed (4 s at 50 tx/s), so a loaded host sends fewer than 200 (a gate run with
    # three workers: 195); the paths above send a count.
    consume = result["consume"]
    assert 0 < consume["committed"] <= 200, consume
    assert consume["consumed"] == consume["committed"], (consume, _log_tail(consume))
    assert consume["commit_to_consumed_ms"]["count"] == consume["committed"]
    assert _is_summary(consume["commit_to_visible_ms"])
    _check_references(result)
    peaks = result["resources"]["peak_rss_bytes"]
    assert {BROKER, SPARK, BENCH, WORKERS} <= set(peaks)
    assert all(isinstance(v, int) and v > 0 for k, v in peaks.items() if k != WORKERS), peaks
    kafka_phase = result["resources"]["phases"]["kafka path"]["processes"]
    # No Python worker runs on the engine's path (no per-row Python there); the state's
    # derivation from the warehouse, a rebuild's, does run them.
    assert kafka_phase.get(WORKERS, {}).get("cpu_seconds", 0) == 0, kafka_phase
    assert kafka_phase[SPARK]["cpu_seconds"] > 0
    assert kafka_phase[SPARK]["cpu_seconds"] != kafka_phase[BROKER]["cpu_seconds"]
    assert result["notes"]
    _check_cpu_per_transaction(result)


def _log_tail(consume: dict[str, Any]) -> str:
    """Return the end of the bench consumer's group log (a consume phase that fell short
    names it: coordinator/bench/consume.py)."""
    log = Path(consume.get("consumer_log", ""))
    return log.read_text()[-6000:] if log.is_file() else "no consumer log"
