"""Issue 61, finding 3: a REST member's unacknowledged messages are capped.

Before, a member that kept receiving and never acknowledged pulled its queues' whole
backlog, bodies included, into the ingress's memory (each message is kept for its
redelivery) for up to 12 hours (the longest invisible duration). Now a member holds at most
`rest.max_unacked_messages` messages (1,000) and `rest.max_unacked_size` bytes of bodies
(16 MiB) not yet acknowledged; a receive past either is `429 too_many_unacked` until
acknowledgements free room (one message always fits an empty member). Against Kafka and the
app on a real port.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from tests.conftest import ConfigFactory
from tests.coordinator.sdk.http_server import serving
from tests.harness import consumer_topics_of
from tests.security.conftest import MIB, Member, deliver

pytestmark = pytest.mark.kafka

TOPIC = "Backlog"
#: rest.max_unacked_size by default.
UNACKED_BUDGET = 16 * MIB


def first_messages(reader: Member) -> httpx.Response:
    """Receive until the member joined and got its first messages."""
    deadline = time.monotonic() + 60
    while True:
        answer = reader.receive(wait_seconds=2)
        assert answer.status_code == 200, answer.text[:500]
        if answer.json()["messages"]:
            return answer
        assert time.monotonic() < deadline, "no message came"


def test_a_member_that_never_acks_holds_a_bounded_backlog(consumer_config: Config) -> None:
    count = 40
    deliver(consumer_config, TOPIC, [bytes([0x80 + n]) * MIB for n in range(count)])  # not UTF-8
    with (
        serving(create_app(consumer_config)) as url,
        httpx.Client(base_url=url, timeout=120) as http,
    ):
        greedy = Member(http, "greedy", TOPIC, max_messages=32, invisible_seconds=3600)
        held: list[dict[str, Any]] = first_messages(greedy).json()["messages"]
        while True:
            answer = greedy.receive(wait_seconds=0)
            if answer.status_code != 200 or not answer.json()["messages"]:
                break
            held += answer.json()["messages"]
        # Before: every message of the backlog, 40 MiB, held for an hour, never refused.
        assert answer.status_code == 429, (
            f"{answer.status_code} after {len(held)} messages ({len(held)} MiB) received and "
            f"never acknowledged: {answer.text[:300]}"
        )
        assert len(held) * MIB <= UNACKED_BUDGET, f"{len(held)} MiB held unacknowledged"
        error = answer.json()
        assert error["error"] == "too_many_unacked", error
        assert "rest.max_unacked_size" in error["message"] and "ack" in error["message"], error
        assert answer.headers["retry-after"]

        # Acknowledgements free room, and the backlog comes on where it stopped.
        assert all(r["acked"] for r in greedy.ack([m["receipt"] for m in held[:4]]))
        more = greedy.receive(wait_seconds=0)
        assert more.status_code == 200, more.text[:300]
        offsets = [m["queue_offset"] for m in more.json()["messages"]]
        assert offsets and offsets[0] == len(held), offsets
        assert len(offsets) <= 4


def test_the_count_of_unacknowledged_messages_is_capped_too(make_config: ConfigFactory) -> None:
    with (
        consumer_topics_of(make_config(**{"rest.max_unacked_messages": "5"})) as config,
        serving(create_app(config)) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        deliver(config, TOPIC, [b"small"] * 12)
        reader = Member(http, "counted", TOPIC, max_messages=32, invisible_seconds=3600)
        held = first_messages(reader).json()["messages"]
        while len(held) < 5:
            answer = reader.receive(wait_seconds=1)
            assert answer.status_code == 200, answer.text
            held += answer.json()["messages"]
        assert len(held) == 5
        over = reader.receive(wait_seconds=0)
        assert over.status_code == 429 and over.json()["error"] == "too_many_unacked", over.text
        assert "rest.max_unacked_messages (5)" in over.json()["message"]
        assert all(r["acked"] for r in reader.ack([m["receipt"] for m in held[:2]]))
        again = reader.receive(wait_seconds=0).json()["messages"]
        assert [m["queue_offset"] for m in again] == [5, 6]
