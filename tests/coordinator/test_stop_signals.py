"""SIGINT and SIGTERM ask for one orderly stop; a second asks it to hurry."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from coordinator.stop_signals import StopSignals


@pytest.fixture
def restore_handlers() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    yield None
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.mark.usefixtures("restore_handlers")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_requests_a_stop_and_a_second_one_hurries_it(signum: int) -> None:
    signals = StopSignals().install()
    os.kill(os.getpid(), signum)  # handled in this (main) thread before kill returns
    assert signals.requested.is_set() and not signals.hurry.is_set()
    os.kill(os.getpid(), signum)
    assert signals.hurry.is_set()


@pytest.mark.usefixtures("restore_handlers")
def test_while_starting_the_first_signal_also_abandons_the_start() -> None:
    signals = StopSignals(interrupting=True).install()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
    assert signals.requested.is_set()
    signals.interrupting = False  # the stop itself runs on; another signal only hurries it
    os.kill(os.getpid(), signal.SIGINT)
    assert signals.hurry.is_set()
