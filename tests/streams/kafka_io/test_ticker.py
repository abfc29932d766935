"""The ticker keeps heartbeats flowing through a broker's kill -9 and restart (contract 7.4),
follows its pace (every tick while busy, every idle interval otherwise), and stores each
heartbeat just before a batch starts (streams/kafka_io/ticker.py: a whole multiple of the interval).

Every timing is read from the heartbeats' own store times (the broker's LogAppendTime), never
counted over a wall-clock window: how long this test takes to look does not count, and a
stalled ticker makes a gap longer, never shorter. So a lower bound on a gap holds on any
machine; an upper bound is generous, or says only that something happened at all.
"""

from __future__ import annotations

import time
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from coordinator.kafka_clients.admin import ensure_topic
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.local_stack.ports import free_port
from streams.kafka_io.tick_pace import TickPace
from streams.kafka_io.ticker import LEAD, Ticker, until_next_tick
from tests.conftest import unavailable
from tests.harness import wait_for

pytestmark = [pytest.mark.kafka, pytest.mark.long]

#: Seconds from the broker's restart to the fifth heartbeat stored after it: reconnecting like
#: Kafka's Java client (coordinator/kafka_clients/options.py: at most 1 s between attempts) took
#: about 1 s here, the rest is room for a loaded machine. With kafka-python's default reconnect
#: backoff (up to 30 s) the fifth came 17-20 s after the restart.
RESUME_WITHIN = 10
#: Store times are whole milliseconds of the broker's clock, the ticker's pace is measured on
#: this process's monotonic clock: a gap may read this much shorter than the ticker waited.
CLOCKS = 0.05
STORED_BY_THE_BROKER = {"message.timestamp.type": "LogAppendTime"}


def heartbeats(bootstrap_servers: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return sum(consumer.end_offsets(partitions).values())
    finally:
        consumer.close()


def stored_times(bootstrap_servers: str, topic: str) -> list[float]:
    """Return the store time (LogAppendTime, epoch seconds) of every record of `topic`, sorted."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        end = consumer.end_offsets(partitions)
        times: list[float] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(p) < end[p] for p in partitions):
            assert time.monotonic() < deadline, f"could not read {topic} back"
            for records in consumer.poll(timeout_ms=500).values():
                times += [record.timestamp / 1000 for record in records]
        return sorted(times)
    finally:
        consumer.close()


def stored_after(bootstrap_servers: str, topic: str, moment: float) -> list[float]:
    """Return the store times of the records of `topic` stored after `moment` (epoch seconds)."""
    return [t for t in stored_times(bootstrap_servers, topic) if t > moment]


def test_heartbeats_resume_after_the_broker_is_killed_and_restarted(tmp_path: Path) -> None:
    broker = KafkaBroker(
        BrokerSettings(tmp_path / "kafka", port=free_port(), controller_port=free_port())
    )
    try:
        broker.start()
    except Exception as exc:
        unavailable("Kafka", exc)
    ticker = None
    try:
        servers = broker.bootstrap_servers
        ensure_topic(servers, "half", 2, STORED_BY_THE_BROKER)
        ensure_topic(servers, "op", 2, STORED_BY_THE_BROKER)
        ticker = Ticker(servers, ["half", "op"], timedelta(seconds=0.5)).start()
        wait_for(lambda: heartbeats(servers, "half") > 0, 60, "the first heartbeats")
        broker.kill()
        killed = time.time()  # from here nothing is stored until the restart
        # The scenario, not a synchronisation: down long enough for kafka-python's default
        # backoff to reach ~10 s (a slower machine keeps it down longer, which changes nothing).
        time.sleep(12)
        broker.start()  # returns once the broker answers
        ready = time.time()
        # Five heartbeats (a few ticks, both partitions), not one lucky tick: they flow again.
        wait_for(
            lambda: len(stored_after(servers, "half", killed)) >= 5,
            120,
            "heartbeats to resume after the restart",
        )
        resumed = stored_after(servers, "half", killed)[4] - ready
        assert resumed <= RESUME_WITHIN, f"heartbeats resumed {resumed:.1f} s after the restart"
    finally:
        if ticker is not None:
            ticker.stop()
        broker.stop()


@pytest.mark.parametrize(
    ("now", "interval", "expected"),
    [
        (100.0, 1.0, 0.85),  # on a boundary: just before the next one
        (100.84, 1.0, 0.01),
        (100.86, 1.0, 0.99),  # past this boundary's send moment: the next one's
        (101.5, 2.0, 0.35),  # multiples of 2 s: 103.85
        (10.0, 0.2, 0.15),  # the lead capped at a quarter of the interval: 10.15
    ],
)
def test_a_tick_is_sent_lead_before_a_multiple_of_the_interval(
    now: float, interval: float, expected: float
) -> None:
    assert until_next_tick(now, interval) == pytest.approx(expected, abs=1e-9)


def test_heartbeats_are_stored_just_before_each_batch_would_start(bootstrap_servers: str) -> None:
    """Each heartbeat is sent LEAD before a whole multiple of the interval, where Spark starts
    a batch, and stored within milliseconds: before that boundary. Most, not all: one that a
    stalled machine held up past it is read a batch later, which delays checks (how much is
    the benchmark's check timeliness) and breaks no contract. A ticker that sends at the
    boundary, or at any other phase, stores none of them in the LEAD before one."""
    topic = f"tick-phase-{time.monotonic_ns()}"
    ensure_topic(bootstrap_servers, topic, 1, STORED_BY_THE_BROKER)
    ticker = Ticker(bootstrap_servers, [topic], timedelta(seconds=1)).start()
    try:
        wait_for(lambda: ticker.sent >= 6, 60, "six heartbeats")
    finally:
        ticker.stop()
    stored = stored_times(bootstrap_servers, topic)
    # How long after its send moment (LEAD before a whole second) each one was stored.
    after_send = [round((t + LEAD) % 1, 3) for t in stored]
    before_boundary = [late for late in after_send if late < LEAD]
    assert len(stored) >= 6 and len(before_boundary) > len(stored) / 2, after_send


def test_the_ticker_rests_when_idle(bootstrap_servers: str) -> None:
    """Idle, a heartbeat waits `idle_interval` after the last one was acknowledged, so the
    store times of consecutive idle heartbeats are at least that far apart (not a tick)."""
    topic = f"tick-idle-{time.monotonic_ns()}"
    ensure_topic(bootstrap_servers, topic, 1, STORED_BY_THE_BROKER)
    pace = TickPace(
        horizon=timedelta(0), margin=timedelta(seconds=1), idle_interval=timedelta(seconds=3)
    )
    ticker = Ticker(bootstrap_servers, [topic], timedelta(seconds=0.2), pace=pace).start()
    try:
        wait_for(lambda: not pace.busy(), 60, "the start's busy stretch to end")
        idle_from = time.time()
        wait_for(
            lambda: len(stored_after(bootstrap_servers, topic, idle_from)) >= 3,
            60,
            "three idle heartbeats",
        )
    finally:
        ticker.stop()
    # The first may be the busy stretch's last (sent before the pace turned idle).
    idle = stored_after(bootstrap_servers, topic, idle_from)
    gaps = [round(b - a, 3) for a, b in pairwise(idle)]
    assert len(gaps) >= 2 and all(gap >= pace.idle_interval - CLOCKS for gap in gaps), gaps


def test_the_ticker_is_busy_again_at_activity_not_at_its_next_idle_heartbeat(
    bootstrap_servers: str,
) -> None:
    """It looks at the pace every tick: after activity it sends every tick at once, not after
    the idle interval. Idle here is a minute, so an idle ticker sends nothing while the test
    waits; busy, twenty heartbeats take four seconds at a 0.2 s tick, and must all be stored
    within the busy stretch (20 s, plus the margin), where an idle pace would send none."""
    topic = f"tick-busy-{time.monotonic_ns()}"
    ensure_topic(bootstrap_servers, topic, 1, STORED_BY_THE_BROKER)
    pace = TickPace(
        horizon=timedelta(0), margin=timedelta(seconds=1), idle_interval=timedelta(seconds=60)
    )
    ticker = Ticker(bootstrap_servers, [topic], timedelta(seconds=0.2), pace=pace).start()
    try:
        wait_for(lambda: not pace.busy(), 60, "the start's busy stretch to end")
        active = time.time()
        pace.saw_activity(timedelta(seconds=20))
        busy_until = time.time() + 20 + pace.margin
        wait_for(
            lambda: len(stored_after(bootstrap_servers, topic, active)) >= 20,
            50,
            "twenty heartbeats after the activity",
        )
    finally:
        ticker.stop()
    busy = stored_after(bootstrap_servers, topic, active)[:20]
    assert busy[-1] <= busy_until, [round(t - active, 2) for t in busy]
