"""Issue 61, finding 10: a receipt acknowledges the delivery it came with, no later one.

Before, the receipt of a message's first delivery still acknowledged it after it had been
handed out again (attempt 2): a client that gave up on a slow first attempt and acked late
settled the second attempt, which another worker of it may still have been processing.
RocketMQ changes the receipt handle at every delivery; now a receipt is bound to its delivery
attempt too, and an older one is refused by name (`acked: false`, reason `superseded`),
for an ack and for a change of invisible duration. Against Kafka and the app on a real port.
"""

from __future__ import annotations

import time

import httpx
import pytest

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from tests.coordinator.sdk.http_server import serving
from tests.security.conftest import Member, deliver

pytestmark = pytest.mark.kafka

TOPIC = "Payouts"


def test_a_receipt_of_an_earlier_delivery_does_not_settle_a_later_one(
    consumer_config: Config,
) -> None:
    deliver(consumer_config, TOPIC, [b"pay out 100"])
    with (
        serving(create_app(consumer_config)) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        worker = Member(http, "payouts", TOPIC, max_messages=1, invisible_seconds=1)
        deadline = time.monotonic() + 60
        while not (first := worker.receive(wait_seconds=2).json()["messages"]):
            assert time.monotonic() < deadline, "the message never came"
        # Not acknowledged within its second: handed out again.
        (second,) = worker.receive(wait_seconds=5).json()["messages"]
        assert (first[0]["delivery_attempt"], second["delivery_attempt"]) == (1, 2)
        assert first[0]["queue_offset"] == second["queue_offset"]

        # Before: acked, and the second attempt settled by the first's receipt.
        (late,) = worker.ack([first[0]["receipt"]])
        assert (late["acked"], late["reason"]) == (False, "superseded"), late
        assert first[0]["receipt"] != second["receipt"]
        changed = http.post(
            "/v1/consumer-groups/payouts/change-invisible-duration",
            json={
                "member": worker.member,
                "receipts": [first[0]["receipt"]],
                "invisible_seconds": 0,
            },
        ).json()["results"]
        assert [(c["changed"], c["reason"]) for c in changed] == [(False, "superseded")]

        # The receipt of the latest delivery settles it, once.
        (done,) = worker.ack([second["receipt"]])
        assert (done["acked"], done["reason"]) == (True, None)
        (again,) = worker.ack([second["receipt"]])
        assert (again["acked"], again["reason"]) == (False, "stale")
