"""Percentiles, the steady-state rate, and the load's pacing bounds."""

from __future__ import annotations

import pytest

from coordinator.bench.pacing import Pacing
from coordinator.bench.stats import (
    median,
    middle_rate,
    percentile,
    ratio,
    summarize,
    sustained_rate,
)


def test_nearest_rank_percentiles() -> None:
    values = list(range(1, 101))
    assert percentile(values, 0.50) == 50
    assert percentile(values, 0.95) == 95
    assert percentile(values, 0.99) == 99
    assert percentile([7], 0.99) == 7


def test_summary_of_nothing_says_so() -> None:
    assert summarize([]) == {
        "count": 0,
        "p50": None,
        "p95": None,
        "p99": None,
        "min": None,
        "max": None,
        "mean": None,
    }
    assert summarize([3.0, 1.0, 2.0])["p50"] == 2.0


def test_median_and_ratio() -> None:
    assert median([3, 1, 2]) == 2
    assert median([1, 2, 3, 4]) == 2.5
    assert median([]) is None
    assert ratio(1, 4) == 0.25
    assert ratio(None, 4) is None
    assert ratio(1, 0) is None


def test_middle_rate_skips_the_ramp_and_the_tail() -> None:
    # 100 decisions: 10 by t=1 (ramp), then 10/s until t=9 (90), then a slow tail.
    series = [(0.0, 0), (1.0, 10), (5.0, 50), (9.0, 90), (30.0, 100)]
    rate, seconds = middle_rate(series, 100)
    assert rate == pytest.approx(10.0)
    assert seconds == pytest.approx(8.0)


def test_middle_rate_needs_both_marks() -> None:
    assert middle_rate([(0.0, 0), (1.0, 50)], 100) == (None, None)
    assert middle_rate([], 0) == (None, None)


def test_window_bounds_what_is_in_flight() -> None:
    pacing = Pacing(window=100)
    assert pacing.room(sent=0, decided=0, elapsed=0, limit=500) == 100
    assert pacing.room(sent=100, decided=30, elapsed=5, limit=500) == 30
    assert pacing.room(sent=100, decided=0, elapsed=5, limit=500) == 0


def test_rate_bounds_what_is_sent_since_the_start() -> None:
    pacing = Pacing(window=None, rate=50)
    assert pacing.room(sent=0, decided=0, elapsed=0, limit=500) == 1
    assert pacing.room(sent=1, decided=0, elapsed=1.0, limit=500) == 50
    assert pacing.room(sent=51, decided=0, elapsed=1.0, limit=500) == 0


@pytest.mark.parametrize(("window", "rate"), [(0, None), (None, 0.0), (None, -1.0)])
def test_impossible_bounds_are_refused(window: int | None, rate: float | None) -> None:
    with pytest.raises(ValueError):
        Pacing(window=window, rate=rate)


def test_sustained_rate_is_the_middle_rate_in_a_steady_state() -> None:
    series = [(float(t), 10 * t) for t in range(11)]  # 10 per second, in 10 steps
    rate, seconds, method = sustained_rate(series, 100)
    assert rate == pytest.approx(10.0)
    assert seconds == pytest.approx(8.0)
    assert "steady state" in method


def test_sustained_rate_without_a_steady_state_counts_from_the_first_send() -> None:
    # One big batch decided 90% at t=60, the checked tail at t=120.
    series = [(-1.0, 0), (0.0, 0), (60.0, 9000), (120.0, 10000)]
    rate, seconds, method = sustained_rate(series, 10_000)
    assert rate == pytest.approx(150.0)
    assert seconds == 60.0
    assert method.startswith("first send to 90% decided")


def test_sustained_rate_of_nothing_decided() -> None:
    assert sustained_rate([(0.0, 0), (5.0, 10)], 100) == (None, None, "not reached")
