"""The report writes JSON, a PNG and a markdown summary that names every headline number."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coordinator.bench.outcomes import judge
from coordinator.bench.report import markdown, write
from coordinator.bench.runner import notes, ratios
from coordinator.bench.stats import summarize
from coordinator.commands.bench import bench


def _path(name: str) -> dict[str, Any]:
    latency = summarize([1200.0, 1500.0, 2500.0])
    batches = {
        "batches": 3,
        "batches_with_rows": 2,
        "rows": 300,
        "duration_ms": summarize([900, 1100, 1300], 0),
        "duration_ms_with_rows": summarize([1100, 1300], 0),
        "busy_ms": 3300,
        "phase_share": {"addBatch": 0.8, "walCommit": 0.1},
        "state_rows_median": 10,
        "state_rows_max": 12,
        "dropped_late": 0,
    }
    return {
        "path": name, "topic": f"Bench{name}",
        "transactions": judge([f"r-{n:09d}-c" for n in range(10)], {}),
        "visible_rolled_back": 0, "send_seconds": 10.0, "drain_seconds": 5.0,
        "offered_tx_per_s": 400.0, "sustained_tx_per_s": 250.5, "sustained_window_s": 8.0,
        "end_to_end_tx_per_s": 200.0, "commit_to_visible_ms": latency,
        "checked_commit_to_visible_ms": summarize([]),
        "check_timeliness_ms": {"recorded": summarize([2100.0]),
                                "received_by_producer": summarize([2300.0])},
        "later_check_timeliness_ms": {"recorded": summarize([350.0, 420.0]),
                                      "received_by_producer": summarize([380.0, 460.0])},
        "responder": {}, "load_process": {"cpu_seconds": 3.0, "peak_rss_bytes": 10**8},
        "where_time_went": {"txcoord-coordinator": batches},
        "series": [[0.0, 0, 0], [2.0, 500, 100], [4.0, 1000, 600], [6.0, 1000, 1000]],
    }  # fmt: skip


def _java_shape(
    duration: int, records: int, transactions: int, tx_per_s: float, records_per_s: float
) -> dict[str, Any]:
    return {
        "transaction_duration_ms": duration,
        "records": records,
        "transactions": transactions,
        "records_per_tx": records / transactions,
        "seconds": 16.0,
        "tx_per_s": tx_per_s,
        "records_per_s": records_per_s,
        "latency_ms": {
            "avg": 17.59,
            "p50": 13.0,
            "p95": 36.0,
            "p99": 39.0,
            "p99_9": 53.0,
            "max": 132.0,
        },
        "cpu_seconds": 20.0,
        "peak_rss_bytes": 3 * 10**8,
        "producers": [],
    }


def sample_result() -> dict[str, Any]:
    """Return a result with every section a real run fills."""
    result: dict[str, Any] = {
        "schema": "txcoord-bench/1", "started_at": "2025-01-02T03:04:05.678+00:00",
        "finished_at": "2025-01-02T03:07:05.678+00:00", "wall_seconds": 180.0,
        "machine": {"cpus": 2, "memory_bytes": 24 * 1024**3, "platform": "Linux",
                    "python": "3.11", "load_average_at_start": [0.5, 0.5, 0.5],
                    "load_average_at_end": [1.5, 1.0, 0.7], "versions": {}},
        "settings": {"duration": 20.0, "count": None, "mix": "commit=80", "window": 10000,
                     "rate": None},
        "configuration": {"transaction_timeout_s": 2.0, "transaction_check_interval_s": 5.0},
        "paths": {"kafka": _path("kafka"), "rest": _path("rest")},
        "pending": {"what": "pending", "levels": [
            {"pending": 0, "steady_transactions": 500, "state_rows_median": 100,
             "coordinator_batch_ms": summarize([800, 900], 0),
             "where_time_went": {},
             "commit_to_visible_ms": summarize([1500.0])},
            {"pending": 10000, "steady_transactions": 500, "state_rows_median": 10100,
             "coordinator_batch_ms": summarize([1800, 1900], 0),
             "where_time_went": {},
             "commit_to_visible_ms": summarize([2500.0])}]},
        "ceiling": {"what": "raw", "records": 1000, "prefill_seconds": 1.0,
                    "repeats": [{"rows_per_s": 5000.0}], "rows_per_s_median": 5000.0,
                    "batch_rows_per_s_median": 9000.0, "tx_per_s_equivalent": 2500.0},
        "peer": {"what": "kafka tx", "producers": 4, "transactions": 1000, "seconds": 10.0,
                 "tx_per_s": 100.0, "visible_latency_ms": summarize([5.0, 8.0]),
                 "not_seen_by_consumer": 0, "load_cpu_seconds": 4.0,
                 "load_peak_rss_bytes": 10**8},
        "java_peer": {"what": "ProducerPerformance", "producers": 2,
                      "batch_target_records_per_tx": 100, "shapes": {
            "short": _java_shape(1, 20_000, 800, 50.0, 1250.0),
            "batch": _java_shape(3, 80_000, 800, 40.0, 4000.0)}},
        "resources": {"phases": {"kafka path": {"seconds": 15.0, "processes": {
            "spark (JVM)": {"cpu_seconds": 12.0, "cores": 0.8}}}},
            "peak_rss_bytes": {"spark (JVM)": 2 * 1024**3}},
    }  # fmt: skip
    result["ratios"] = ratios(result)
    result["notes"] = notes(result)
    return result


def test_ratios_divide_our_sustained_rate() -> None:
    r = ratios(sample_result())["kafka"]
    assert r == {
        "sustained_tx_per_s": 250.5,
        "ours_over_peer": 2.505,
        "ours_over_ceiling": 0.1,
        "ours_over_java_short": 5.01,
        "ours_over_java_short_records": 0.2,
        "ours_over_java_batch": 6.263,
        "ours_over_java_batch_records": 0.063,
    }


def test_ratios_without_the_java_peer_are_none() -> None:
    result = sample_result()
    result["java_peer"] = None
    r = ratios(result)["rest"]
    assert r["ours_over_peer"] == 2.505
    assert r["ours_over_java_short"] is r["ours_over_java_batch_records"] is None
    result["ratios"] = ratios(result)
    assert "| rest | 2.505 | 0.100 | -, - | -, - |" in markdown(result, None)


def test_markdown_names_the_headline_numbers() -> None:
    text = markdown(sample_result(), "plot.png")
    for expected in (
        "![throughput and latency](plot.png)",
        "**250.5**",
        "2.505",
        "10,000",
        "transaction_timeout 2 s",
        "1,500 / 2,500 / 2,500",
        "| short | 1 | 800 | 25.0 | **50.0** | 1,250.0 | "
        "17.6 / 13.0 / 36.0 / 39.0 / 53.0 / 132.0 |",
        "| kafka | 2.505 | 0.100 | 5.010, 0.200 | 6.263, 0.063 |",
    ):
        assert expected in text


def test_markdown_shows_first_and_later_check_timeliness_side_by_side() -> None:
    result = sample_result()
    text = markdown(result, None)
    assert "transaction_timeout 2 s, transaction_check_interval 5 s." in text
    assert "a later one at check n-1 + 5 s" in text
    assert "| kafka | first | 1 | 2,100 / 2,100 / 2,100 | 2,300 / 2,300 / 2,300 |" in text
    assert "| kafka | later | 2 | 350 / 420 / 420 | 380 / 460 / 460 |" in text
    # A result of a run before later checks were measured still renders.
    del result["paths"]["rest"]["later_check_timeliness_ms"]
    assert "| rest | later | - | - | - |" in markdown(result, None)


def test_write_puts_json_markdown_and_png_side_by_side(tmp_path: Path) -> None:
    written = write(sample_result(), tmp_path / "results")
    assert set(written) == {"json", "md", "png"}
    assert json.loads(written["json"].read_text())["schema"] == "txcoord-bench/1"
    assert written["png"].stat().st_size > 10_000
    assert written["png"].name in written["md"].read_text()
    assert written["json"].name == "bench-20250102T030405Z.json"


def test_results_go_to_the_working_directory_unless_out_says() -> None:
    """An installed txcoord has no bench/results: a checkout writes there with --out."""
    (out,) = [option for option in bench.params if option.name == "out"]
    assert out.default == Path("bench-results")
    assert "--out bench/results" in (out.help or "")


def test_judge_counts_expected_wrong_and_undecided() -> None:
    verdict = judge(
        ["r-000000001-c", "r-000000002-r", "r-000000003-cc", "r-000000004-cr", "r-000000005-rc"],
        {
            "r-000000001-c": "COMMITTED",
            "r-000000002-r": "COMMITTED",
            "r-000000003-cc": "COMMITTED",
            "r-000000005-rc": "COMMITTED",
        },
    )
    assert verdict["sent"] == 5
    assert verdict["as_expected"] == 3
    assert verdict["by_kind"]["rechecked-commit"] == {"sent": 1, "as_expected": 1}
    assert verdict["wrong"] == 1
    assert verdict["undecided"] == 1
    assert verdict["by_kind"]["rollback"] == {"sent": 1, "wrong:COMMITTED": 1}


def test_notes_say_which_engine_settings_ran() -> None:
    result = sample_result()
    settings = {
        "transaction_timeout_s": 2.0,
        "transaction_check_interval_s": 5.0,
        "trigger_interval_s": 1.0,
        "tick_interval_s": 1.0,
        "idle_tick_interval_s": 15.0,
        "kafka_partitions": 4,
        "shuffle_partitions": 2,
        "config_file": None,
    }
    result["configuration"] = settings
    (default,) = [note for note in notes(result) if "every other engine setting" in note]
    assert "transaction_timeout is 2.0 s and transaction_check_interval 5.0 s" in default
    assert "is the default: trigger 1.0 s, tick 1.0 s, idle tick 15.0 s" in default
    (checks,) = [note for note in notes(result) if "later_check_timeliness_ms" in note]
    assert "requested_at of check n-1 - transaction_check_interval" in checks
    result["configuration"] = {**settings, "trigger_interval_s": 0.5, "config_file": "t.toml"}
    (chosen,) = [note for note in notes(result) if "every other engine setting" in note]
    assert "is as t.toml sets it (defaults for what it does not): trigger 0.5 s" in chosen
    assert "2 shuffle partitions" in chosen
    set_only = {**settings, "trigger_interval_s": 0.25, "overrides": {"streams.x": "0.25s"}}
    result["configuration"] = set_only
    (given,) = [note for note in notes(result) if "every other engine setting" in note]
    assert "is as --set streams.x=0.25s sets it (defaults for what it does not)" in given
    result["configuration"] = {**set_only, "config_file": "t.toml"}
    (both,) = [note for note in notes(result) if "every other engine setting" in note]
    assert "is as t.toml and --set streams.x=0.25s set it (defaults for the rest)" in both
