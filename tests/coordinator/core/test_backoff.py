"""Backoff: exponential, capped, with half of each delay random."""

from __future__ import annotations

import pytest

from coordinator.core.backoff import Backoff


def test_delays_double_up_to_the_cap() -> None:
    backoff = Backoff(initial=0.5, maximum=4.0, rand=lambda: 1.0)
    assert [backoff.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_jitter_keeps_at_least_half_of_the_delay() -> None:
    low = Backoff(initial=1.0, maximum=8.0, rand=lambda: 0.0)
    assert [low.next_delay() for _ in range(3)] == [0.5, 1.0, 2.0]


def test_reset_starts_over() -> None:
    backoff = Backoff(initial=0.5, maximum=30.0, rand=lambda: 1.0)
    for _ in range(5):
        backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 0.5


def test_many_failures_do_not_overflow() -> None:
    backoff = Backoff(initial=0.5, maximum=30.0, rand=lambda: 1.0)
    for _ in range(10_000):
        delay = backoff.next_delay()
    assert delay == 30.0


@pytest.mark.parametrize(("initial", "maximum", "multiplier"), [(0, 1, 2), (2, 1, 2), (1, 2, 0.5)])
def test_impossible_settings_are_refused(initial: float, maximum: float, multiplier: float) -> None:
    with pytest.raises(ValueError, match="Backoff"):
        Backoff(initial=initial, maximum=maximum, multiplier=multiplier)
