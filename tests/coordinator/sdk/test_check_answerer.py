"""The background check loop against the in-memory transport: pure threading, no broker."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from coordinator.sdk import (
    CheckRequest,
    InMemoryTransport,
    OpReceipt,
    RequestRejectedError,
    SdkError,
    TransportError,
)
from coordinator.sdk.check_answerer import CheckAnswerer

from .helpers import RecordingListener, State, check_request, wait_until


@pytest.fixture
def transport() -> InMemoryTransport:
    return InMemoryTransport()


def make(
    transport: InMemoryTransport, listener: RecordingListener, **options: int
) -> CheckAnswerer:
    settings: dict[str, int] = {"workers": 2, "queue_size": 10, **options}
    answerer = CheckAnswerer(transport, listener, "orders", poll_wait_seconds=0.05, **settings)
    answerer.start()
    return answerer


@pytest.fixture
def stopped() -> Iterator[list[CheckAnswerer]]:
    """Collect answerers to stop after the test, whatever happens."""
    answerers: list[CheckAnswerer] = []
    yield answerers
    for answerer in answerers:
        answerer.stop(timeout=1)


def test_each_request_is_answered_from_check_then_acknowledged(
    transport: InMemoryTransport, stopped: list[CheckAnswerer]
) -> None:
    states = {"a": State.COMMIT_MESSAGE, "b": State.ROLLBACK_MESSAGE, "c": State.UNKNOW}
    listener = RecordingListener(check=lambda r: states[r.transaction_id])
    stopped.append(answerer := make(transport, listener))
    transport.add_checks(check_request(tx, offset=i) for i, tx in enumerate(states))
    wait_until(lambda: len(transport.acknowledged) == 3, what="three acknowledgements")
    assert sorted(transport.ops) == [
        ("a", "COMMIT", True),
        ("b", "ROLLBACK", True),
        ("c", "UNKNOWN", True),
    ]
    # Counted just after its acknowledgement, in the worker's thread: waited for, not read.
    wait_until(lambda: answerer.stats().answered == 3, what="three answers counted")


def test_a_listener_that_raises_answers_unknown(
    transport: InMemoryTransport, stopped: list[CheckAnswerer]
) -> None:
    def boom(request: CheckRequest) -> State:
        raise RuntimeError("no database")

    stopped.append(make(transport, RecordingListener(check=boom)))
    transport.add_checks([check_request("a")])
    wait_until(lambda: transport.ops == [("a", "UNKNOWN", True)], what="the UNKNOWN answer")


def test_a_copy_in_flight_is_acknowledged_only_with_the_first_answer(
    transport: InMemoryTransport, stopped: list[CheckAnswerer]
) -> None:
    release = threading.Event()

    def slow(request: CheckRequest) -> State:
        release.wait(60)  # released by the test; the timeout only keeps a failure from hanging
        return State.COMMIT_MESSAGE

    listener = RecordingListener(check=slow)
    stopped.append(answerer := make(transport, listener))
    transport.add_checks([check_request("a", 1, offset=0)])
    wait_until(lambda: answerer.stats().taken == 1)
    transport.add_checks([check_request("a", 1, offset=1)])  # a redelivered copy
    wait_until(lambda: answerer.stats().duplicates == 1)
    assert transport.acknowledged == []
    release.set()
    wait_until(lambda: len(transport.acknowledged) == 2, what="both copies acknowledged")
    assert transport.ops == [("a", "COMMIT", True)]
    assert {r.source for r in transport.acknowledged} == {("checks", 0, 0), ("checks", 0, 1)}


def test_a_copy_of_an_answered_request_is_not_answered_again(
    transport: InMemoryTransport, stopped: list[CheckAnswerer]
) -> None:
    listener = RecordingListener()
    stopped.append(answerer := make(transport, listener))
    transport.add_checks([check_request("a", 1)])
    wait_until(lambda: len(transport.acknowledged) == 1)
    transport.add_checks([check_request("a", 1, offset=1), check_request("a", 2, offset=2)])
    wait_until(lambda: len(transport.acknowledged) == 3)
    assert listener.check_counts() == {("a", 1): 1, ("a", 2): 1}
    assert answerer.stats().duplicates == 1


def test_a_full_queue_stops_taking_and_loses_nothing(
    transport: InMemoryTransport, stopped: list[CheckAnswerer], caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def slow(request: CheckRequest) -> State:
        release.wait(60)  # released by the test; the timeout only keeps a failure from hanging
        return State.ROLLBACK_MESSAGE

    listener = RecordingListener(check=slow)
    caplog.set_level(logging.INFO, logger="coordinator.sdk.check_answerer")
    stopped.append(answerer := make(transport, listener, workers=1, queue_size=2))
    transport.add_checks(check_request(f"t{i}", offset=i) for i in range(10))
    # One request inside the listener, two queued, seven left in the transport.
    wait_until(lambda: answerer.stats().queued == 2 and transport.pending_checks() == 7)
    wait_until(lambda: 0 in transport.polled_max, what="a keep-alive poll while full")
    assert max(transport.polled_max) <= 2
    assert "check queue of group orders is full" in caplog.text
    release.set()
    wait_until(lambda: len(transport.acknowledged) == 10, what="every request answered")
    assert listener.check_counts() == {(f"t{i}", 1): 1 for i in range(10)}
    assert answerer.stats().high_water == 2
    assert "has room again" in caplog.text


def test_polling_failures_back_off_and_recover(
    transport: InMemoryTransport, stopped: list[CheckAnswerer], caplog: pytest.LogCaptureFixture
) -> None:
    transport.failing_polls = 2
    stopped.append(make(transport, RecordingListener()))
    transport.add_checks([check_request("a")])
    wait_until(lambda: transport.ops == [("a", "COMMIT", True)], what="the answer after failures")
    assert caplog.text.count("polling check requests of group orders failed") == 2


def test_a_failed_answer_is_retried_until_sent(
    transport: InMemoryTransport, stopped: list[CheckAnswerer]
) -> None:
    transport.failing_ops = 2
    listener = RecordingListener()
    stopped.append(make(transport, listener))
    transport.add_checks([check_request("a")])
    wait_until(lambda: len(transport.acknowledged) == 1)
    assert transport.ops == [("a", "COMMIT", True)]
    assert listener.check_counts() == {("a", 1): 1}  # the listener is asked once


class RefusingTransport(InMemoryTransport):
    def __init__(self) -> None:
        super().__init__()
        self.attempts = 0

    def send_op(self, transaction_id: str, op: str, from_check: bool) -> object:  # type: ignore[override]
        self.attempts += 1
        raise RequestRejectedError(403, "forbidden", "token of another group")


def test_a_refused_answer_is_not_retried() -> None:
    transport = RefusingTransport()
    answerer = make(transport, RecordingListener())
    try:
        transport.add_checks([check_request("a")])
        wait_until(lambda: answerer.stats().refused == 1)
        assert transport.attempts == 1
        assert len(transport.acknowledged) == 1
    finally:
        answerer.stop(timeout=1)


def test_a_request_of_another_group_is_skipped(
    transport: InMemoryTransport, stopped: list[CheckAnswerer]
) -> None:
    listener = RecordingListener()
    stopped.append(make(transport, listener))
    transport.add_checks([check_request("x", group="payments"), check_request("a", offset=1)])
    wait_until(lambda: len(transport.acknowledged) == 2)
    assert transport.ops == [("a", "COMMIT", True)]
    assert listener.check_counts() == {("a", 1): 1}


def test_stop_answers_what_is_queued_within_the_timeout(transport: InMemoryTransport) -> None:
    listener = RecordingListener(delay=0.05)
    answerer = make(transport, listener, workers=1, queue_size=5)
    transport.add_checks(check_request(f"t{i}", offset=i) for i in range(5))
    wait_until(lambda: transport.pending_checks() == 0)
    answerer.stop(timeout=60)  # returns once the queue is answered (0.25 s of listener)
    assert len(transport.ops) == 5
    assert answerer.stats().abandoned == 0


def test_stop_abandons_unanswered_requests_without_acknowledging_them(
    transport: InMemoryTransport, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def stuck(request: CheckRequest) -> State:
        release.wait(60)  # released by the test once stop has given up on it
        return State.COMMIT_MESSAGE

    answerer = make(transport, RecordingListener(check=stuck), workers=1, queue_size=3)
    transport.add_checks(check_request(f"t{i}", offset=i) for i in range(4))
    wait_until(lambda: answerer.stats().queued == 3)
    try:
        answerer.stop(timeout=0.2)
    finally:
        release.set()
    assert answerer.stats().abandoned == 3
    assert "3 check request(s) of group orders left unanswered" in caplog.text
    # The stuck one finishes on its own; its acknowledgement, the last thing that can
    # happen, follows its answer's storage: waited for, so the abandoned three would show.
    wait_until(lambda: len(transport.acknowledged) == 1, what="the stuck one acknowledged")
    assert [r.transaction_id for r in transport.acknowledged] == ["t0"]
    assert [op[0] for op in transport.ops] == ["t0"]
    answerer.stop(timeout=1)  # idempotent


class ImpatientTransport(InMemoryTransport):
    """Returns at once with nothing, whatever the wait; notes when each poll came."""

    def __init__(self) -> None:
        super().__init__()
        self.polled_at: list[float] = []

    def poll_checks(self, max_records: int, wait_seconds: float) -> list[CheckRequest]:
        self.polled_at.append(time.monotonic())
        return []


def test_a_transport_that_does_not_wait_is_not_polled_in_a_busy_loop() -> None:
    transport = ImpatientTransport()
    answerer = CheckAnswerer(transport, RecordingListener(), "orders", poll_wait_seconds=0.2)
    began = time.monotonic()
    answerer.start()
    try:
        wait_until(lambda: len(transport.polled_at) >= 5, what="five empty polls")
    finally:
        answerer.stop(timeout=1)
    # After an empty answer the loop waits out the rest of its poll wait, so poll k (from 0)
    # never comes before k poll waits since the start: a busy loop polls thousands of times
    # a second, while a loaded machine only makes polls later. (1 ms: the clock's rounding.)
    early = [
        (k, round(at - began, 4))
        for k, at in enumerate(transport.polled_at)
        if at - began < k * 0.2 - 0.001
    ]
    assert early == [], f"polls sooner than one per poll wait: {early}"


class BatchingTransport(InMemoryTransport):
    """Stores ops many at a time; its first call waits for `release`; `failures` fail once."""

    def __init__(self, failures: dict[str, SdkError] | None = None) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.failures = dict(failures or {})
        self.sending = threading.Event()
        self.release = threading.Event()

    def send_ops(self, ops: Sequence[tuple[str, str, bool]]) -> list[OpReceipt | SdkError]:
        self.sending.set()
        if not self.batches:
            self.release.wait(60)  # set by the test; the timeout only keeps a failure from hanging
        self.batches.append([transaction_id for transaction_id, _, _ in ops])
        results: list[OpReceipt | SdkError] = []
        for transaction_id, op, from_check in ops:
            failure = self.failures.pop(transaction_id, None)
            results.append(failure or self.send_op(transaction_id, op, from_check))
        return results


def test_answers_decided_while_one_is_sent_go_out_in_one_call(stopped: list[CheckAnswerer]) -> None:
    transport = BatchingTransport()
    listener = RecordingListener()
    stopped.append(answerer := make(transport, listener, queue_size=50))
    transport.add_checks([check_request("t0")])
    assert transport.sending.wait(10)  # one worker waits on the broker with t0's answer
    transport.add_checks(check_request(f"t{i}", offset=i) for i in range(1, 21))
    wait_until(lambda: len(listener.checked) == 21, what="the other worker deciding the rest")
    assert transport.acknowledged == []
    transport.release.set()
    wait_until(lambda: len(transport.acknowledged) == 21, what="every answer acknowledged")
    assert transport.batches == [["t0"], [f"t{i}" for i in range(1, 21)]]
    assert sorted(transport.ops) == sorted((f"t{i}", "COMMIT", True) for i in range(21))
    assert listener.check_counts() == {(f"t{i}", 1): 1 for i in range(21)}
    # Counted just after its acknowledgement, in the worker's thread: waited for, not read.
    wait_until(lambda: answerer.stats().answered == 21, what="21 answers counted")


def test_in_a_batch_only_the_failed_answer_is_retried_and_a_refused_one_is_not(
    stopped: list[CheckAnswerer],
) -> None:
    transport = BatchingTransport(
        {
            "b": TransportError("broker away"),
            "c": RequestRejectedError(403, "forbidden", "token of another group"),
        }
    )
    listener = RecordingListener()
    stopped.append(answerer := make(transport, listener, queue_size=50))
    transport.add_checks([check_request("a")])
    assert transport.sending.wait(10)
    transport.add_checks(check_request(tx, offset=i) for i, tx in enumerate("bcd", start=1))
    wait_until(lambda: len(listener.checked) == 4, what="every check decided")
    transport.release.set()
    wait_until(lambda: len(transport.acknowledged) == 4, what="four acknowledgements")
    assert transport.batches == [["a"], ["b", "c", "d"], ["b"]]
    assert sorted(transport.ops) == [
        ("a", "COMMIT", True),
        ("b", "COMMIT", True),
        ("d", "COMMIT", True),
    ]
    # Each is counted just after its acknowledgement: waited for, not read.
    wait_until(
        lambda: (answerer.stats().answered, answerer.stats().refused) == (3, 1),
        what="three answered and one refused",
    )


class FaultyAcknowledgeTransport(BatchingTransport):
    """Its acknowledge raises for transaction "b" (a transport's defect, say)."""

    def acknowledge(self, request: CheckRequest) -> None:
        if request.transaction_id == "b":
            raise RuntimeError("acknowledge broke")
        super().acknowledge(request)


def test_an_acknowledge_that_raises_spoils_neither_the_batch_nor_stop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = FaultyAcknowledgeTransport()
    transport.release.set()
    answerer = make(transport, RecordingListener(), queue_size=50)
    transport.add_checks(check_request(tx, offset=i) for i, tx in enumerate("abcd"))
    wait_until(lambda: len(transport.ops) == 4, what="every answer stored")
    wait_until(lambda: len(transport.acknowledged) == 3, what="the others acknowledged")
    assert "check 1 of b failed unexpectedly" in caplog.text
    # Every request was settled, so stop waits for none: one left unsettled would hold it
    # for the whole timeout. Only that is measured; a loaded machine's stop takes seconds.
    started = time.monotonic()
    answerer.stop(timeout=60)
    assert time.monotonic() - started < 30
    assert answerer.stats().abandoned == 0
