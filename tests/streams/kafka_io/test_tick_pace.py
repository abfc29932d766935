"""The ticker's pace: busy for the horizon after activity, idle otherwise (pure, a fake clock)."""

from __future__ import annotations

from datetime import timedelta

from streams.kafka_io.tick_pace import TickPace


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pace(clock: Clock) -> TickPace:
    return TickPace(
        horizon=timedelta(seconds=30),
        margin=timedelta(seconds=5),
        idle_interval=timedelta(seconds=15),
        clock=clock,
    )


def test_a_start_is_busy_for_the_horizon_and_the_margin() -> None:
    clock = Clock()
    started = pace(clock)
    clock.now += 34.9
    assert started.busy()
    clock.now += 0.2
    assert not started.busy()


def test_activity_keeps_it_busy_from_now_and_never_shortens_a_longer_stretch() -> None:
    clock = Clock()
    paced = pace(clock)
    clock.now += 100
    assert not paced.busy()
    paced.saw_activity(timedelta(seconds=600))  # a half with a long immunity
    clock.now += 10
    paced.saw_activity()  # a later batch with a shorter horizon
    clock.now += 594
    assert paced.busy()
    clock.now += 1.1
    assert not paced.busy()


def test_a_due_time_shorter_than_the_horizon_keeps_the_horizon() -> None:
    clock = Clock()
    paced = pace(clock)
    clock.now += 100
    paced.saw_activity(timedelta(seconds=1))
    clock.now += 34
    assert paced.busy()
