"""Percentiles, medians and rates for the report (pure)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """Return the nearest-rank percentile of an ascending sequence (fraction in 0..1)."""
    if not ordered:
        raise ValueError("no values")
    rank = max(math.ceil(fraction * len(ordered)), 1)
    return float(ordered[min(rank, len(ordered)) - 1])


def summarize(values: Sequence[float], digits: int = 1) -> dict[str, Any]:
    """Return count, p50, p95, p99, min, max and mean of `values` (None when empty)."""
    ordered = sorted(values)
    if not ordered:
        return {
            "count": 0,
            "p50": None,
            "p95": None,
            "p99": None,
            "min": None,
            "max": None,
            "mean": None,
        }
    return {
        "count": len(ordered),
        "p50": round(percentile(ordered, 0.50), digits),
        "p95": round(percentile(ordered, 0.95), digits),
        "p99": round(percentile(ordered, 0.99), digits),
        "min": round(ordered[0], digits),
        "max": round(ordered[-1], digits),
        "mean": round(sum(ordered) / len(ordered), digits),
    }


def median(values: Sequence[float]) -> float | None:
    """Return the median (the mean of the middle two for an even count), None when empty."""
    ordered = sorted(values)
    if not ordered:
        return None
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (ordered[middle - 1] + ordered[middle]) / 2


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """Return numerator / denominator rounded to 3 digits, None when either is missing or 0."""
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)


def middle_rate(
    series: Sequence[tuple[float, int]], total: int, low: float = 0.1, high: float = 0.9
) -> tuple[float | None, float | None]:
    """Return (rate, seconds) of the counts between `low` and `high` of `total` being reached.

    `series` is (seconds since start, cumulative count), ascending. The rate skips the
    ramp-up before the first `low` share and the tail after `high` (e.g. the drain of
    checked transactions). (None, None) when the series never spans both marks.
    """
    if total <= 0:
        return None, None
    start = next(((t, n) for t, n in series if n >= low * total), None)
    end = next(((t, n) for t, n in series if n >= high * total), None)
    if start is None or end is None or end[0] <= start[0]:
        return None, None
    seconds = end[0] - start[0]
    return (end[1] - start[1]) / seconds, seconds


#: Fewest distinct increases between the 10% and 90% marks for the middle rate to count as
#: a steady state; fewer means the run was a few big batches, not a stream of them.
MIN_STEPS = 4


def sustained_rate(
    series: Sequence[tuple[float, int]], total: int
) -> tuple[float | None, float | None, str]:
    """Return (rate, seconds, method): decisions per second in the steady state if reached.

    `series` is (seconds since the first send, cumulative decisions). With at least
    MIN_STEPS increases between 10% and 90% of `total`, the rate between those marks;
    otherwise (a run shorter than a few of the pipeline's cycles) the decisions at the 90%
    mark divided by the time from the first send to it, which counts the pipeline's
    latency once and so understates a longer run's rate.
    """
    rate, seconds = middle_rate(series, total)
    if rate is not None:
        low, high = 0.1 * total, 0.9 * total
        inside = [n for _, n in series if low <= n <= high]
        steps = sum(1 for a, b in itertools.pairwise(inside) if b > a)
        if steps >= MIN_STEPS:
            return rate, seconds, "between 10% and 90% decided (steady state)"
    mark = next(((t, n) for t, n in series if total > 0 and n >= 0.9 * total), None)
    if mark is None or mark[0] <= 0:
        return None, None, "not reached"
    return (
        mark[1] / mark[0],
        mark[0],
        "first send to 90% decided (no steady state: too few batches in the run)",
    )
