"""The live Telemetry streams (coordinator/rocketmq/telemetry.py): which groups' checks a
stream gets, for whom it polls, and what it pushes."""

from __future__ import annotations

import base64
import queue
import threading
import time
from typing import Any

import pytest

from coordinator.rest.auth import ConsumeGrant, Principal
from coordinator.rest.models import CheckRequest
from coordinator.rocketmq.messages import instance_of
from coordinator.rocketmq.telemetry import LiveStreams, TooManyStreamsError

PRODUCER = Principal(group="orders", admin=False, name="orders-app", instance_namespace="abc")
CONSUMER = Principal(
    group=None, admin=False, name="billing", consume=(ConsumeGrant("billing", frozenset("*")),)
)
ADMIN = Principal(group=None, admin=True, name="ops")


class FakePoller:
    """Records every poll; hands out the checks put in for a group."""

    def __init__(self) -> None:
        self.polls: list[tuple[str, str | None]] = []
        self.checks: dict[str, list[CheckRequest]] = {}
        self._lock = threading.Lock()

    def poll(
        self,
        producer_group: str,
        max_records: int,
        wait_seconds: float,
        producer_instance: str | None = None,
        max_bytes: int | None = None,
    ) -> list[CheckRequest]:
        with self._lock:
            self.polls.append((producer_group, producer_instance))
            found = self.checks.pop(producer_group, [])
        if not found:
            time.sleep(0.01)
        return found

    def close(self) -> None:
        pass


def check(group: str) -> CheckRequest:
    return CheckRequest(
        transaction_id="tx-1",
        msg_id="0-1",
        producer_group=group,
        topic="Orders",
        queue_id=0,
        body_base64=base64.b64encode(b"paid").decode(),
        keys=[],
        tags=None,
        properties={},
        check_number=1,
        prepared_at_ms=1,
        requested_at_ms=2,
    )


def polled_groups(poller: FakePoller) -> set[str]:
    deadline = time.monotonic() + 5
    while not poller.polls and time.monotonic() < deadline:
        time.sleep(0.01)
    return {group for group, _ in poller.polls}


def test_a_producer_token_s_stream_gets_its_group_s_checks_for_its_instance() -> None:
    poller = FakePoller()
    streams = LiveStreams(poller)
    stream = streams.open("host@1@0@abc", PRODUCER)
    poller.checks["orders"] = [check("orders")]
    streams.producer_settings(stream, ["Orders", "Refunds"])  # the token's group, whatever topic
    pushed: Any = stream.outbox.get(timeout=5)
    assert pushed.recover_orphaned_transaction_command.transaction_id == "tx-1"
    assert polled_groups(poller) == {"orders"}
    # Its instance: the client id's, bound to the token (only its polls get its checks first).
    assert {instance for _, instance in poller.polls} == {f"abc.{instance_of('host@1@0@abc')}"}
    streams.close_all()


def test_an_admin_s_stream_gets_the_checks_of_each_topic_s_group() -> None:
    poller = FakePoller()
    streams = LiveStreams(poller)
    stream = streams.open("host@1@0@abc", ADMIN)
    streams.named("host@1@0@abc", ADMIN, "Refunds")  # a route asked before the Settings
    streams.producer_settings(stream, ["Orders"])
    deadline = time.monotonic() + 5
    while polled_groups(poller) != {"Orders", "Refunds"} and time.monotonic() < deadline:
        time.sleep(0.01)
    assert polled_groups(poller) == {"Orders", "Refunds"}
    streams.close_all()


def test_a_consumer_token_s_stream_gets_no_check() -> None:
    """A check carries its message: a token that may not produce for a group never sees it,
    not even the group RocketMQ names after the topic."""
    poller = FakePoller()
    streams = LiveStreams(poller)
    stream = streams.open("host@1@0@abc", CONSUMER)
    streams.producer_settings(stream, ["Orders"])
    streams.named("host@1@0@abc", CONSUMER, "Orders")
    # Proven, not waited for: another stream's poller runs, and this one never polled.
    other = streams.open("host@2@0@abc", PRODUCER)
    streams.producer_settings(other, ["Orders"])
    assert polled_groups(poller) == {"orders"}
    assert stream.groups == set()
    with_nothing: queue.Queue[Any] = stream.outbox
    assert with_nothing.empty()
    streams.close_all()


def test_too_many_streams_are_refused_and_a_closed_one_frees_its_place() -> None:
    streams = LiveStreams(FakePoller(), max_streams=1)
    first = streams.open("a@1", ADMIN)
    with pytest.raises(TooManyStreamsError, match="1 Telemetry streams"):
        streams.open("b@1", ADMIN)
    streams.close(first)
    streams.open("b@1", ADMIN)
    streams.close_all()
