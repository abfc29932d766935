"""Tally: a reader waiting for the next counts wakes when they are added, not at a poll.

"At once" and "woken by the add" are told apart from "waited for the timeout" by a long
timeout and half of it as the bound: a stalled test process takes seconds, never a minute.
"""

from __future__ import annotations

import threading
import time

from streams.progress.tally import Tally

#: The timeout of a wait that must not run out.
WAIT = 120


def test_wait_past_wakes_when_counts_are_added() -> None:
    tally = Tally()
    seen = tally.version
    adder = threading.Timer(0.2, lambda: tally.add(committed=3))
    started = time.monotonic()
    adder.start()
    latest = tally.wait_past(seen, timeout=WAIT)
    waited = time.monotonic() - started
    adder.join()
    assert latest == seen + 1
    assert tally.snapshot().committed == 3
    assert 0.15 <= waited < WAIT / 2  # not before the add; woken by it, not by the timeout


def test_wait_past_returns_at_once_when_counts_moved_already() -> None:
    tally = Tally()
    seen = tally.version
    tally.add(rolled_back=1)
    started = time.monotonic()
    assert tally.wait_past(seen, timeout=WAIT) == seen + 1
    assert time.monotonic() - started < WAIT / 2


def test_wait_past_gives_up_after_the_timeout() -> None:
    tally = Tally()
    seen = tally.version
    started = time.monotonic()
    assert tally.wait_past(seen, timeout=0.2) == seen
    assert time.monotonic() - started >= 0.19
