"""CPU per transaction: the run's processes over the decided transactions, and in Java records."""

from __future__ import annotations

from typing import Any

from coordinator.bench.cpu_cost import cpu_per_transaction
from coordinator.bench.report import markdown
from coordinator.bench.resources import OTHER
from tests.coordinator.bench.test_report import sample_result


def _result() -> dict[str, Any]:
    result = sample_result()
    result["paths"]["kafka"]["transactions"]["decided"] = 4000
    result["paths"]["rest"]["transactions"]["decided"] = 0  # nothing decided: no figure
    result["resources"]["phases"]["kafka path"]["processes"] = {
        "spark (JVM)": {"cpu_seconds": 2.0, "cores": 0.5},
        "load processes": {"cpu_seconds": 0.4, "cores": 0.1},
        "kafka broker (JVM)": {"cpu_seconds": 0.2, "cores": 0.05},
        OTHER: {"cpu_seconds": 1.0, "cores": 0.25},  # the machine's, not the run's
    }
    # 20 s of CPU for 20,000 records: 1,000 us per record.
    result["java_peer"]["shapes"]["short"]["cpu_seconds"] = 20.0
    return result


def test_cpu_counts_the_runs_processes_over_the_decided_transactions() -> None:
    costs = cpu_per_transaction(_result())
    assert costs == {
        "kafka": {
            "ms": 0.65,
            "by_process": {"spark (JVM)": 0.5, "load processes": 0.1, "kafka broker (JVM)": 0.05},
            "java_short_us_per_record": 1000.0,
            "in_java_records": 0.65,
        }
    }


def test_without_the_java_peer_only_milliseconds() -> None:
    result = _result()
    result["java_peer"] = None
    cost = cpu_per_transaction(result)["kafka"]
    assert cost["ms"] == 0.65
    assert cost["java_short_us_per_record"] is cost["in_java_records"] is None


def test_without_resources_nothing() -> None:
    result = _result()
    del result["resources"]
    assert cpu_per_transaction(result) == {}


def test_markdown_shows_the_figure() -> None:
    result = _result()
    result["cpu_per_transaction"] = cpu_per_transaction(result)
    text = markdown(result, None)
    assert (
        "| path | **all processes** | kafka broker (JVM) | load processes | spark (JVM) "
        "| Java peer CPU per record (µs) | **in Java peer records** |"
    ) in text
    assert "| kafka | **0.650** | 0.050 | 0.100 | 0.500 | 1,000.0 | **0.65** |" in text
    # An older result without the section renders as before.
    del result["cpu_per_transaction"]
    assert "CPU per decided transaction" not in markdown(result, None)
