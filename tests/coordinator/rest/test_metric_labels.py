"""metric_labels.py: only well-formed names become labels, at most so many series, the rest
summed under (other)."""

from __future__ import annotations

from coordinator.rest.metric_labels import OTHER, bounded_pairs


def test_well_formed_pairs_within_the_bound_stay_as_they_are() -> None:
    lag = {("ledger", "OrderPaid"): 3, ("audit", "Refunds"): 0}
    assert bounded_pairs(lag, 2) == lag


def test_malformed_names_are_summed_under_other() -> None:
    lag = {("ledger", "OrderPaid"): 3, ("evil\ngroup", "OrderPaid"): 4, ("a", "../x"): 5,
           ("g" * 256, "T"): 1, (OTHER, OTHER): 2}  # fmt: skip
    assert bounded_pairs(lag, 10) == {("ledger", "OrderPaid"): 3, (OTHER, OTHER): 12}


def test_the_largest_lags_are_kept_and_the_rest_summed() -> None:
    lag = {(f"g{n}", "T"): n for n in range(10)}
    kept = bounded_pairs(lag, 4)
    assert kept == {("g9", "T"): 9, ("g8", "T"): 8, ("g7", "T"): 7, (OTHER, OTHER): 21}
    assert sum(kept.values()) == sum(lag.values())
    assert bounded_pairs(lag, 1) == {(OTHER, OTHER): 45}
