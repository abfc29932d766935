"""The warm-up's test of a settled JIT (coordinator/bench/jit.py), on made-up samples."""

from __future__ import annotations

import pytest

from coordinator.bench.jit import Settling, spent


def test_a_window_must_pass_before_anything_is_settled() -> None:
    settling = Settling(window=15, share=0.15)
    assert settling.recent_share() is None
    settling.observe(0.0, 100.0)
    settling.observe(14.0, 100.0)  # no compiling at all, but only 14 s seen
    assert settling.recent_share() is None
    assert not settling.settled()
    settling.observe(15.0, 100.0)
    assert settling.recent_share() == 0
    assert settling.settled()


def test_settles_once_the_last_window_compiles_under_the_share() -> None:
    settling = Settling(window=15, share=0.15)
    compiled = 0.0
    for second in range(0, 61):  # a core's worth of compiling for 40 s, then 5% of one
        compiled += 1.0 if second <= 40 else 0.05
        settling.observe(float(second), compiled)
        if second < 54:  # (1 s at full speed + 14 s at 0.05) / 15 s = 11%
            assert not settling.settled(), second
    assert settling.settled()
    assert settling.recent_share() == pytest.approx(0.05, abs=0.01)


def test_only_the_last_window_counts() -> None:
    settling = Settling(window=10, share=0.2)
    for second in range(0, 31):  # 30% of a core throughout: never settled
        settling.observe(float(second), 0.3 * second)
    assert not settling.settled()
    assert settling.recent_share() == pytest.approx(0.3)


def test_spent_is_unknown_when_either_reading_is() -> None:
    assert spent(10.0, 12.345) == 2.35
    assert spent(None, 12.0) is None
    assert spent(10.0, None) is None
