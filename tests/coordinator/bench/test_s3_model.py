"""The model of a real object store's latency over the bench's S3 phase (pure arithmetic)."""

from __future__ import annotations

from coordinator.bench.s3_model import CRITICAL_REQUESTS, LATENCIES_MS, project


def phase(batch_p50: float, per_batch: float, visible_p50: float, rate: float) -> dict:
    path = {
        "where_time_went": {"txcoord-coordinator": {"duration_ms": {"p50": batch_p50}}},
        "commit_to_visible_ms": {"p50": visible_p50},
        "sustained_tx_per_s": rate,
    }
    return {"paths": {"kafka": path}, "requests": {"per_batch": per_batch}}


def test_each_latency_adds_the_critical_requests_at_best_and_all_of_them_at_worst() -> None:
    rows = project(phase(batch_p50=1000, per_batch=100, visible_p50=2000, rate=500))
    assert [row["request_ms"] for row in rows] == list(LATENCIES_MS)
    at_20 = rows[0]
    best, worst = 1000 + CRITICAL_REQUESTS * 20, 1000 + 100 * 20
    assert at_20["batch_p50_ms"] == [best, worst]
    # A commit waits half a batch for the next, then that batch: 1.5 times the growth.
    assert at_20["commit_to_visible_p50_ms"] == [
        round(2000 + 1.5 * (best - 1000)),
        round(2000 + 1.5 * (worst - 1000)),
    ]
    # The same rows per batch over a longer batch.
    assert at_20["sustained_tx_per_s"] == [
        round(500 * 1000 / best, 1),
        round(500 * 1000 / worst, 1),
    ]


def test_without_the_s3_phase_or_its_request_count_there_is_no_model() -> None:
    assert project(None) == []
    assert project({"paths": {}, "requests": {}}) == []
    assert project(phase(1000, 0, 2000, 500)) == []
