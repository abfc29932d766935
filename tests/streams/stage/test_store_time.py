"""Timers decided in store time, judged from the tables of a real run.

Every time compared here is one the tables record: `stored_at` of a half or an op (the
broker's LogAppendTime), `requested_at` of a check, `resolved_at` / `discarded_at` of an end,
and the timestamp of each check record (when producers could read it).
The rules (what the coordinator owes, whatever its batches cost):

- check 1 is due at the half's stored_at + max(timeout, immunity); check n+1 at
  requested_at(check n) + interval; after check `check_max`, the discard is due at
  requested_at(last check) + interval;
- a decisive op (COMMIT / ROLLBACK) stored before a check or the discard was due wins:
  that check is never sent, that discard never happens;
- a check is never sent before it is due, and is sent within the contract's bound after it
  (its watermark lag, transaction_timeout, plus a few seconds: FEW_SECONDS).

Order and causality are asserted exactly; the wall clock only within the contract's bound.
How soon after due each check really goes out is measured by `txcoord bench`, and printed
here (`figures`, shown with -rP) for whoever reads a run.

A processing-time timer breaks the second rule: it fires before the answer stored in time
has crossed ingest and join, so the answer is judged LATE (or a needless check goes out).

One engine serves every test but the cold start: its transactions run side by side, each
plan under its own id prefix, and the tests read what the tables say about their own.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from streams.query.decision_query import QUERY_NAME
from tests.conftest import config_under
from tests.harness import (
    FEW_SECONDS,
    Engine,
    Producer,
    Reply,
    Responder,
    count,
    table,
    wait_for,
    warm,
)
from tests.streams.conftest import ConfigFactory
from tests.streams.store_time_story import (
    CHECK_MAX,
    INTERVAL,
    TIMEOUT,
    Story,
    read_stories,
    seconds,
    warm_up_cycle,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

#: Store time and `requested_at` are clocks of one host, read to the millisecond.
CLOCK = 0.5
#: The contract's bound on how late after its due time a check may be sent, and reach the
#: producers on the check topic: the stage's watermark lags store time by the timeout, and
#: "a few seconds" beyond it. For check 1 that is 2 x timeout + FEW_SECONDS after the half.
#: A bound, not a figure: clean runs gave 3-4 s requested and 4-5 s published after due,
#: and a run beside another worker's kill -9 test 7.2 s published.
LATE = TIMEOUT + FEW_SECONDS

#: The answer during the last interval: sent when check 2 is read, timed to be stored this
#: long after check 3 was due (requested_at(check 2) + interval), so it always lands inside
#: check 3's interval, before the discard is due at requested_at(check 3) + interval,
#: however late check 3 itself reaches the producer. That is the race store time decides.
LAST_ANSWER_AFTER = 2.0
#: The answer to every check of "answer-first", read from the check topic: a second after
#: it was requested (or at once, if it was read later than that).
FIRST_ANSWER_AFTER = 1.0
#: A producer's own COMMIT this long after its half was stored: after check 1 was due,
#: before check 2 can be (requested_at(check 1) + interval >= stored_at + timeout + interval).
MEANWHILE_AFTER = TIMEOUT + 2.0

#: id prefix -> how many transactions follow that plan.
PLANS = {"commit-last": 6, "rollback-last": 6, "answer-first": 3, "meanwhile": 4, "silent": 4}


def plan_of(tx: str) -> str:
    return tx.rsplit("-", 1)[0]


def answer(request: dict[str, Any]) -> str | Reply | None:
    """The producers' check listener: each plan answers by check number."""
    plan, number = plan_of(request["transaction_id"]), request["check_number"]
    if plan == "answer-first":
        return Reply("COMMIT", FIRST_ANSWER_AFTER)
    if plan in ("commit-last", "rollback-last"):
        if number == CHECK_MAX - 1:  # decided during the last interval (see LAST_ANSWER_AFTER)
            return Reply(plan.split("-")[0].upper(), INTERVAL + LAST_ANSWER_AFTER)
        return None if number == CHECK_MAX else "UNKNOWN"
    if plan == "meanwhile":
        return None  # it commits on its own (see MEANWHILE_AFTER)
    return "UNKNOWN"


# -- a freshly started stack (runs first: nothing else has warmed Spark yet) ----------------
def test_a_freshly_started_stack_sends_the_first_check_on_time(
    spark: SparkSession, make_config: ConfigFactory
) -> None:
    config = make_config(
        transaction_timeout=f"{TIMEOUT}s",
        transaction_check_interval=f"{INTERVAL}s",
        transaction_check_max="1",
    )
    engine = Engine(spark, config)
    try:
        producer = Producer(config)
        producer.half("cold")  # right after the start, and no other traffic at all
        producer.close()
        wait_for(
            lambda: count(config, "system/check_requests") >= 1,
            300,
            "the first check",
        )
    finally:
        engine.stop()
    story = read_stories(spark, config)["cold"]
    assert story.stored_at is not None and sorted(story.checks) == [1], story
    first = seconds(story.checks[1], story.stored_at)
    print(f"store-time figures: cold start, first check {first} s after the half")
    assert TIMEOUT - CLOCK <= first <= TIMEOUT + LATE, f"first check {first} s after the half"


# -- a coordinator that lags: a stored answer it has not read yet ------------------------------
def test_an_answer_stored_while_the_coordinator_lags_wins_over_every_timer(
    spark: SparkSession, make_config: ConfigFactory
) -> None:
    # A long interval and one check: the answer must be stored within the interval of check 1
    # being requested, and this test first sees check 1 in its table and stops the query
    # (seconds each on a loaded machine: the interval leaves room for both).
    interval = 30
    config = make_config(
        transaction_timeout=f"{TIMEOUT}s",
        transaction_check_interval=f"{interval}s",
        transaction_check_max="1",
    )
    engine = Engine(spark, config)
    producer = Producer(config)
    try:
        warm(engine)
        producer.half("lagging").get(timeout=60)
        wait_for(lambda: count(config, "system/check_requests") >= 1, 240, "check 1")
        engine.stop_coordinator()
        producer.op("lagging", "COMMIT", from_check=True).get(timeout=60)
        # The scenario, not a synchronisation: the query stays down past the moment a
        # processing-time clock would discard (requested_at(check 1) + interval).
        (check,) = table(spark, config, "system/check_requests").collect()
        discard_due = check.requested_at.timestamp() + interval
        time.sleep(max(0.0, discard_due + 5 - time.time()))
        engine.start_coordinator()
        # Ended, and the answer landed and judged (APPLIED, or LATE after a discard).
        wait_for(
            lambda: (
                count(config, "system/transactions") >= 1
                and count(config, "system/op_verdicts") >= 1
            ),
            240,
            "the transaction to end and its answer to be judged",
        )
    finally:
        producer.close()
        engine.stop()
    story = read_stories(spark, config)["lagging"]
    assert story.answered_at is not None and 1 in story.checks, story
    # The scenario itself: the answer was stored before the discard was due (else the test
    # ran something else: a discard and a LATE answer are right then, and prove nothing).
    margin = seconds(story.checks[1] + timedelta(seconds=interval), story.answered_at)
    assert margin > 0, f"scenario missed: answer stored {-margin} s after the discard was due"
    ended = (story.state(), sorted(story.checks), story.delivered, story.verdicts)
    assert ended == ("COMMITTED", [1], 1, [("COMMIT", "APPLIED")]), ended


# -- one warm engine, every plan side by side ------------------------------------------------
@pytest.fixture(scope="module")
def stories(
    spark: SparkSession, bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Story]]:
    """Run every plan on one warm engine; return the tables' story of each transaction."""
    config = config_under(
        tmp_path_factory.mktemp("store-time"),
        bootstrap_servers,
        transaction_timeout=f"{TIMEOUT}s",
        transaction_check_interval=f"{INTERVAL}s",
        transaction_check_max=str(CHECK_MAX),
    )
    txs = [f"{plan}-{i}" for plan, count in PLANS.items() for i in range(count)]
    engine = Engine(spark, config)
    responder = Responder(config, answer)
    try:
        warm(engine)
        warm_up_cycle(spark, config)
        producer = Producer(config)
        sends = {tx: producer.half(tx) for tx in txs}
        # The "meanwhile" producers commit on their own, MEANWHILE_AFTER past their half's
        # store time (the send's LogAppendTime): a producer's timing, not a synchronisation.
        stored = sorted(
            (sends[tx].get(timeout=60).timestamp / 1000, tx)
            for tx in txs
            if plan_of(tx) == "meanwhile"
        )
        for at, tx in stored:
            time.sleep(max(0.0, at + MEANWHILE_AFTER - time.time()))
            producer.op(tx, "COMMIT").get(timeout=60)
        producer.close()

        def finals() -> int:
            return count(config, "system/transactions")

        wait_for(lambda: finals() >= len(txs), 300, "every transaction to end")
        # Every answer sent is judged (a late one too): nothing of the run is still on its way.
        sent = len(responder.sent)
        wait_for(
            lambda: count(config, "system/op_verdicts") >= sent,
            120,
            f"verdicts on the {sent} answers",
        )
        # And the coordinator has moved on by two batches: a stray check would show by now.
        written = max(r.batch_id for r in table(spark, config, "system/op_verdicts").collect())
        wait_for(
            lambda: engine.progress.last[QUERY_NAME]["batch"] >= written + 2,
            60,
            "two more coordinator batches",
        )
        told = read_stories(spark, config, dict(responder.published_ms))
        print(figures(told))  # shown with -rP: what the bounds below are judged on
        yield told
    finally:
        responder.stop()
        engine.stop()


def after_due(story: Story, number: int) -> tuple[float, float]:
    """Return how long after its due time check `number` was requested, and published."""
    due = story.due(number)
    return seconds(story.checks[number], due), seconds(story.published[number], due)


def figures(stories: dict[str, Story]) -> str:
    """Return the run's timings in one line: first checks, spacing, lateness after due."""
    firsts = first_check_delays(stories)
    gaps = sorted(g for each in later_checks(stories).values() for g in each)
    late = sorted(
        max(after_due(s, n)) for s in stories.values() for n in s.checks if n in s.published
    )
    extra = sum(len(s.sent_after_answer()) for s in stories.values())

    def spread(values: list[float]) -> str:
        return f"{values[0]}/{values[len(values) // 2]}/{values[-1]}" if values else "-"

    return (
        f"store-time figures (min/p50/max s): first check after the half {spread(firsts)}; "
        f"later checks apart {spread(gaps)}; sent or published after due {spread(late)}; "
        f"checks sent after a stored answer {extra}"
    )


def of_plan(stories: dict[str, Story], plan: str) -> dict[str, Story]:
    mine = {tx: s for tx, s in stories.items() if plan_of(tx) == plan}
    assert len(mine) == PLANS[plan], sorted(mine)
    return mine


def last_answer_race(stories: dict[str, Story], plan: str) -> dict[str, tuple[Any, ...]]:
    """Return, per transaction of `plan`: (state, checks, margin of its answer, verdicts).

    The margin is how long before the discard was due the answer was stored; infinite when
    the last check was never sent (no discard can be due then).
    """
    seen = {}
    for tx, s in of_plan(stories, plan).items():
        margin = None
        if len(s.checks) == CHECK_MAX and s.answered_at is not None:
            margin = seconds(s.due(CHECK_MAX + 1), s.answered_at)
        elif len(s.checks) == CHECK_MAX - 1 and s.answered_at is not None:
            margin = float("inf")
        seen[tx] = (s.state(), sorted(s.checks), margin, s.verdicts)
    return seen


def assert_mostly_in_time(margins: dict[str, float | None], what: str) -> None:
    """Fail unless most answers were stored before the decision they race was due.

    That is the scenario under test; a check that reached its producer later than the
    interval (a batch slower than the interval) makes its answer late, and a run where most
    are late has not tested the race at all.
    """
    in_time = [tx for tx, margin in margins.items() if margin is not None and margin > 0]
    assert 2 * len(in_time) >= len(margins), f"most answers stored after {what} was due: {margins}"


def assert_in_time_answers_win(stories: dict[str, Story], plan: str, state: str) -> None:
    seen = last_answer_race(stories, plan)
    # Stored after check 3 was due (by construction): check 3 may rightly go out, or be
    # skipped when the answer was read before it was sent; check 4 does not exist.
    assert all(checks in ([1, 2, 3], [1, 2]) for _, checks, _, _ in seen.values()), seen
    # Store time decides: an answer stored in time wins over the discard, a later one is LATE.
    wrong = {tx: v for tx, v in seen.items() if (v[0] == state) != (v[2] is not None and v[2] > 0)}
    assert wrong == {}, f"decided against store time (state, checks, margin, verdicts): {wrong}"
    assert_mostly_in_time({tx: v[2] for tx, v in seen.items()}, "the discard")


def test_an_answer_to_the_last_check_stored_in_time_commits(stories: dict[str, Story]) -> None:
    assert_in_time_answers_win(stories, "commit-last", "COMMITTED")
    mine = of_plan(stories, "commit-last")
    assert {tx: s.delivered for tx, s in mine.items() if s.state() == "COMMITTED"} == {
        tx: 1 for tx, s in mine.items() if s.state() == "COMMITTED"
    }
    assert all(s.delivered == 0 for s in mine.values() if s.state() != "COMMITTED")


def test_an_answer_to_the_last_check_stored_in_time_rolls_back(
    stories: dict[str, Story],
) -> None:
    assert_in_time_answers_win(stories, "rollback-last", "ROLLED_BACK")
    assert all(s.delivered == 0 for s in of_plan(stories, "rollback-last").values())


def test_no_check_is_sent_after_an_answer_was_stored(stories: dict[str, Story]) -> None:
    # The rule, over every transaction of the run: no check due after a stored answer is sent.
    extra = {tx: s.sent_after_answer() for tx, s in stories.items() if s.sent_after_answer()}
    assert extra == {}, f"checks sent after the answer was stored: {extra}"
    # Committed after check 1 was due and (as planned) before check 2 could be: check 1 may
    # have gone out (it was due first), check 2 only if the commit was stored after it was due
    # (a test process paused past its plan); most commits must have kept to the plan.
    meanwhile = {
        tx: (
            s.state(),
            sorted(s.checks),
            s.delivered,
            seconds(s.answered_at, s.due(1)) if s.answered_at else None,
        )
        for tx, s in of_plan(stories, "meanwhile").items()
    }
    assert all(v[3] is not None and v[3] > 0 for v in meanwhile.values()), meanwhile
    assert all(v[0] == "COMMITTED" and v[2] == 1 for v in meanwhile.values()), meanwhile
    assert_mostly_in_time(
        {tx: 1.0 if checks in ([], [1]) else None for tx, (_, checks, _, _) in meanwhile.items()},
        "check 2",
    )
    # Every check answered COMMIT a second after it was requested: committed, delivered
    # once, and (by the rule above) checked again only if a check reached it too late to
    # answer before the next one was due.
    first = {
        tx: (s.state(), sorted(s.checks), s.delivered)
        for tx, s in of_plan(stories, "answer-first").items()
    }
    assert all(v[0] == "COMMITTED" and v[2] == 1 for v in first.values()), first


def later_checks(stories: dict[str, Story]) -> dict[str, list[float]]:
    """Return the seconds between consecutive checks of every transaction answered UNKNOWN
    (or not yet) until its last interval: they are all checked on the same clock."""
    unanswered = ("silent", "commit-last", "rollback-last")
    return {
        tx: [seconds(b, a) for a, b in itertools.pairwise(s.requested)]
        for tx, s in stories.items()
        if plan_of(tx) in unanswered
    }


def test_later_checks_come_an_interval_apart_and_the_discard_one_interval_after(
    stories: dict[str, Story],
) -> None:
    silent = of_plan(stories, "silent")
    assert all(sorted(s.checks) == [1, 2, 3] for s in silent.values()), silent
    gaps = later_checks(stories)
    flat = sorted(g for each in gaps.values() for g in each)
    assert flat and flat[0] >= INTERVAL - CLOCK, (flat, gaps)  # never early
    # The last answer is stored LAST_ANSWER_AFTER past check 3's due time: check 3 goes out
    # first, or, if the answer was read before the stream had passed that due time, never
    # (no check for an answered transaction; RocketMQ's check reads the op queue first).
    for tx, s in {**of_plan(stories, "commit-last"), **of_plan(stories, "rollback-last")}.items():
        assert sorted(s.checks) in ([1, 2], [1, 2, 3]), (tx, s)
        assert 3 in s.checks or s.answered_at is not None, (tx, s)
    ends = {
        tx: (
            s.state(),
            s.finals[-1].reason if s.finals else None,
            seconds(s.discarded_at, s.requested[-1]) if s.discarded_at else None,
        )
        for tx, s in silent.items()
    }
    assert all(
        state == "DISCARDED" and reason == "check_max" for state, reason, _ in ends.values()
    ), ends
    assert all(after is not None and after >= INTERVAL - CLOCK for *_, after in ends.values()), ends


def test_later_checks_come_within_the_contracts_bound_of_an_interval(
    stories: dict[str, Story],
) -> None:
    gaps = later_checks(stories)
    flat = sorted(g for each in gaps.values() for g in each)
    assert flat and flat[-1] <= INTERVAL + LATE, (flat, gaps)
    # A last answer that kept check 3 from going out was stored before the stage could have
    # owed check 3 (its due time plus the stage's lag, the contract's bound).
    for tx, s in {**of_plan(stories, "commit-last"), **of_plan(stories, "rollback-last")}.items():
        if 3 not in s.checks:
            assert s.answered_at is not None, (tx, s)
            assert s.answered_at <= s.due(3) + timedelta(seconds=LATE), (tx, s)


def test_checks_reach_the_producers_after_due_and_within_the_contracts_bound(
    stories: dict[str, Story],
) -> None:
    # `requested_at` says when a check was sent; the check record's own timestamp says when
    # producers could read it. Neither comes before the due time, nor after the contract's
    # bound (LATE); how soon they come is `txcoord bench`'s figure.
    late = {}
    for tx, s in stories.items():
        for n in sorted(s.checks):
            assert n in s.published, f"check {n} of {tx} never reached the check topic"
            late[(tx, n)] = after_due(s, n)
    shown = f"(requested, published) - due: {late}"
    early = {key: times for key, times in late.items() if min(times) < -CLOCK}
    assert early == {}, f"checks sent or published before due; {shown}"
    # Published after requested: a check reaches the topic only once its batch decided it.
    unordered = {key: (r, p) for key, (r, p) in late.items() if p < r - CLOCK}
    assert unordered == {}, f"checks published before they were requested; {shown}"
    requested = max(r for r, _ in late.values())
    published = max(p for _, p in late.values())
    assert requested <= LATE, f"requested {requested} s after due; {shown}"
    assert published <= LATE, f"published {published} s after due; {shown}"


def first_check_delays(stories: dict[str, Story]) -> list[float]:
    """Return the seconds from each half's store time to its check 1, sorted."""
    return sorted(
        seconds(s.checks[1], s.stored_at)
        for s in stories.values()
        if s.stored_at is not None and 1 in s.checks
    )


def test_a_warm_stack_checks_every_unanswered_transaction_never_early(
    stories: dict[str, Story],
) -> None:
    delays = first_check_delays(stories)
    assert delays and delays[0] >= TIMEOUT - CLOCK, delays
    # A transaction without check 1 was answered before the stream passed check 1's due
    # time ("meanwhile" commits TIMEOUT + 2 s after its half: it needs no check); every
    # other one was checked.
    unchecked = {tx: s for tx, s in stories.items() if 1 not in s.checks}
    assert all(
        plan_of(tx) == "meanwhile" and s.answered_at is not None for tx, s in unchecked.items()
    ), unchecked


def test_a_warm_stack_sends_first_checks_on_time(stories: dict[str, Story]) -> None:
    late = TIMEOUT + LATE  # after the half: the contract's bound for check 1
    delays = first_check_delays(stories)
    assert delays and delays[-1] <= late, delays
    unchecked = [s for s in stories.values() if 1 not in s.checks]
    assert all(
        s.stored_at is not None
        and s.answered_at is not None
        and seconds(s.answered_at, s.stored_at) <= late
        for s in unchecked
    ), unchecked


def test_every_transaction_ends_once(stories: dict[str, Story]) -> None:
    ends = Counter(len(s.finals) for s in stories.values())
    assert ends == {1: sum(PLANS.values())}, ends
