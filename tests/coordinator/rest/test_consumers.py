"""Receive and ack over HTTP (contract 5.5): the REST ingress's consumers against real parts.

The round trip and the group's division of queues run the real engine, committed messages
in real topic tables, and the app on a real port (httpx); limits, auth and bad bodies need
only Kafka (the consumer topics, an empty warehouse) and the app in-process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from coordinator.rest.auth import Authenticator, load_token_file
from coordinator.rest.consumers import ConsumerMembers
from coordinator.rest.poll_slots import PollSlots
from coordinator.rest.receipts import ReceiptCodec
from coordinator.sdk.consumer import Receipt
from coordinator.sdk.consumer.queue_reader import QueueReader
from tests.coordinator.rest.conftest import (
    ADMIN_TOKEN,
    BILLING_TOKEN,
    LEDGER_TOKEN,
    LOCAL,
    ORDERS_TOKEN,
    bearer,
    write_auth_file,
)
from tests.coordinator.sdk.http_server import serving
from tests.harness import Engine, Producer, consumer_topics_of, kafka_members, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

TOPIC = "Billing"
QUEUES = 4  # the engine's default_queue_count


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


@pytest.fixture
def consumer_topics(config: Config) -> Iterator[Config]:
    """Return `config` with its deliveries and offsets topics made, for the tests that run
    no engine; dropped afterwards."""
    with consumer_topics_of(config) as made:
        yield made


def commit(config: Config, txs: list[str]) -> None:
    """Send and commit `txs`, spread over the QUEUES queues of TOPIC."""
    producer = Producer(config)
    try:
        for i, tx in enumerate(txs):
            producer.half(tx, topic=TOPIC, queue_id=i % QUEUES)
        producer.flush()
        for tx in txs:
            producer.op(tx, "COMMIT")
        producer.flush()
    finally:
        producer.close()


class RestConsumer:
    """One REST member of `group`: receive and ack over HTTP, keeping its member id."""

    def __init__(
        self, http: httpx.Client | TestClient, group: str, member: str | None = None, **body: Any
    ) -> None:
        self.http = http
        self.group = group
        self.member = member
        self.body = {"topic": TOPIC, **body}
        self.got: list[dict[str, Any]] = []

    def post(self, action: str, body: dict[str, Any]) -> Any:
        answer = self.http.post(f"/v1/consumer-groups/{self.group}/{action}", json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def receive(self, wait: float = 0.3, most: int = 32, **extra: Any) -> list[dict[str, Any]]:
        body = {**self.body, "max_messages": most, "wait_seconds": wait, **extra}
        if self.member is not None:
            body["member"] = self.member
        answer = self.post("receive", body)
        self.member = answer["member"]
        messages: list[dict[str, Any]] = answer["messages"]
        return messages

    def ack(self, receipts: list[str], member: str | None = None) -> list[dict[str, Any]]:
        answer = self.post("ack", {"member": member or self.member, "receipts": receipts})
        results: list[dict[str, Any]] = answer["results"]
        return results

    def take_and_ack(self) -> None:
        """Receive once and ack everything received (each ack must count)."""
        messages = self.receive()
        if messages:
            results = self.ack([m["receipt"] for m in messages])
            assert [(r["acked"], r["reason"]) for r in results] == [(True, None)] * len(messages)
            self.got += messages


def pump(
    consumers: list[RestConsumer],
    count: int,
    timeout: float,
    members: ConsumerMembers | None = None,
) -> None:
    """Receive and ack with every consumer in turn until they got `count` messages in all;
    a timeout reports what each member of `members` held (queues, generation, hand-over)."""
    deadline = time.monotonic() + timeout
    while sum(len(c.got) for c in consumers) < count:
        got = sum(len(c.got) for c in consumers)
        assert time.monotonic() < deadline, (
            f"{got} of {count} in {timeout} s; got by queue "
            f"{[sorted(in_queue_order(c.got)) for c in consumers]}; {held_by(members)}"
        )
        for c in consumers:
            c.take_and_ack()


def held_by(members: ConsumerMembers | None) -> str:
    """Return what each SDK consumer behind the REST members knows (for a failure report)."""
    if members is None:
        return ""
    try:
        return _held_by(members)
    except Exception as exc:  # the report must never hide the failure it explains
        return f"(members not described: {exc!r})"


def _held_by(members: ConsumerMembers) -> str:
    found = []
    for (group, name), entry in sorted(members._members.items()):
        c = entry.consumer
        if not found:  # what the warehouse holds, read afresh: delivered or not
            found.append(f"delivered {QueueReader(c.reader.warehouse).ends(c.subscriptions)}")
        joins = c._membership.assignments if c._membership is not None else None
        found.append(
            f"{group}/{name}: members {c.members}, owns {c.assigned()}, knows "
            f"{sorted(c._ends.items())}, lag {c.lag()}, joins {joins}, divided at "
            f"{c._assignment}, handing over {c._handing_over} (since join {c._hand_over_at})"
        )
    return "; ".join(found)


def in_queue_order(messages: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Return each queue's offsets in the order they came."""
    by_queue: dict[int, list[int]] = defaultdict(list)
    for m in messages:
        by_queue[m["queue_id"]].append(m["queue_offset"])
    return dict(by_queue)


def metric(http: httpx.Client | TestClient, line_start: str) -> float:
    """Return the value of the first /metrics line that starts with `line_start`."""
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no metric {line_start}")


def no_group_lag_left(http: httpx.Client, c: Any) -> None:
    """Wait until every group's lag, as operators scrape it, says billing has none left: from
    the stored offsets (member `c` stores them as it receives), read every 15 s."""
    group_lag = f'rocketmq_consumer_lag_messages{{consumer_group="billing",topic="{TOPIC}"}}'

    def no_lag_left() -> bool:
        assert c.receive(wait=1) == []
        try:
            return metric(http, group_lag) == 0
        except AssertionError:  # not read yet
            return False

    wait_for(no_lag_left, 90, "the group's lag reported as 0")


# -- against the engine ------------------------------------------------------------------


def test_receive_then_ack_each_message_once_in_queue_order_and_redelivery(
    config: Config, engine: Engine
) -> None:
    with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=90) as http:
        c = RestConsumer(
            http, "billing", start_from="first", invisible_seconds=30, body_encoding="text"
        )
        assert c.receive(wait=1) == []  # joins the group: the member id is made up
        assert c.member is not None and c.member.startswith("rest-")
        txs = [f"a-{i}" for i in range(24)]
        commit(config, txs)
        pump([c], len(txs), 180)
        assert sorted(m["transaction_id"] for m in c.got) == sorted(txs)  # each once
        for offsets in in_queue_order(c.got).values():
            assert offsets == list(range(len(offsets)))  # dense, in order
        first = c.got[0]
        assert first["topic"] == TOPIC and first["producer_group"] == "orders"
        assert first["body"] == f"body-{first['transaction_id']}"
        assert first["body_base64"] is None  # each body once, as asked
        assert first["keys"] == [first["transaction_id"]]
        assert first["delivery_attempt"] == 1
        assert first["committed_at"].endswith("Z") and first["delivered_at"].endswith("Z")
        assert first["transaction_id"] not in first["receipt"]  # opaque
        assert metric(http, "txcoord_rest_consumer_members ") == 1
        lag = metric(http, f'txcoord_rest_consumer_lag{{group="billing",topic="{TOPIC}"}}')
        assert lag == 0

        # Not acknowledged within invisible_seconds: handed out again, one attempt more.
        commit(config, ["d-0"])
        deadline = time.monotonic() + 120
        while not (once := c.receive(wait=5, most=1, invisible_seconds=2)):
            assert time.monotonic() < deadline, "d-0 never came"
        (again,) = c.receive(wait=15, most=1, invisible_seconds=2)
        assert [m["transaction_id"] for m in (*once, again)] == ["d-0", "d-0"]
        assert [m["delivery_attempt"] for m in (*once, again)] == [1, 2]
        assert again["queue_offset"] == once[0]["queue_offset"]
        # Only the latest delivery's receipt settles it (tests/security/
        # test_receipt_per_delivery.py), once.
        results = c.ack([once[0]["receipt"], again["receipt"], again["receipt"]])
        assert [(r["acked"], r["reason"]) for r in results] == [
            (False, "superseded"),
            (True, None),
            (False, "stale"),
        ]

        # Made visible again at once by change-invisible-duration.
        commit(config, ["e-0"])
        deadline = time.monotonic() + 120
        while not (got := c.receive(wait=5, most=1)):
            assert time.monotonic() < deadline, "e-0 never came"
        changed = c.post(
            "change-invisible-duration",
            {"member": c.member, "receipts": [got[0]["receipt"]], "invisible_seconds": 0},
        )["results"]
        assert [(r["changed"], r["reason"]) for r in changed] == [(True, None)]
        (back,) = c.receive(wait=5, most=1)
        assert (back["transaction_id"], back["delivery_attempt"]) == ("e-0", 2)

        # Receipts are bound to their member, and cannot be altered.
        receipt = back["receipt"]
        forged = receipt[:-4] + ("AAAA" if not receipt.endswith("AAAA") else "BBBB")
        assert c.ack([forged, "nonsense"]) == [
            {"receipt": forged, "acked": False, "reason": "invalid_receipt"},
            {"receipt": "nonsense", "acked": False, "reason": "invalid_receipt"},
        ]
        (other,) = c.ack([receipt], member="someone-else")
        assert (other["acked"], other["reason"]) == (False, "invalid_receipt")
        assert c.ack([receipt])[0]["acked"]
        assert metric(http, "txcoord_rest_consumer_messages_acked_total") == len(txs) + 2

        no_group_lag_left(http, c)


def test_two_members_split_the_queues_and_an_idle_one_hands_them_over(
    config: Config, engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    idle = 10.0
    caplog.set_level(logging.INFO, logger="coordinator.sdk.consumer")  # its moves, on failure
    members = ConsumerMembers(config, idle_timeout=idle)
    app = create_app(config, consumers=members)
    with serving(app) as url, httpx.Client(base_url=url, timeout=90) as http:
        a = RestConsumer(http, "ledger", member="member-a", start_from="first")
        b = RestConsumer(http, "ledger", member="member-b", start_from="first")

        def joined() -> bool:
            for _ in range(3):  # each member sees the generation in its own receive
                assert a.receive() == [] and b.receive() == []
            return kafka_members(config, "ledger") == {"member-a", "member-b"}

        wait_for(joined, 90, "both members in one generation")
        assert metric(http, "txcoord_rest_consumer_members ") == 2
        first = [f"a-{i}" for i in range(32)]
        commit(config, first)
        pump([a, b], len(first), 180, members)
        assert sorted(m["transaction_id"] for m in a.got + b.got) == sorted(first)
        queues_a, queues_b = set(in_queue_order(a.got)), set(in_queue_order(b.got))
        assert queues_a and queues_b and queues_a.isdisjoint(queues_b)
        assert queues_a | queues_b == set(range(QUEUES))
        for offsets in in_queue_order(a.got + b.got).values():
            assert offsets == list(range(len(offsets)))
        stale_receipt = a.got[0]["receipt"]

        # member-a is no longer called: closed after `idle` s, its queues go to member-b.
        def a_left() -> bool:
            b.receive()
            return kafka_members(config, "ledger") == {"member-b"}

        wait_for(a_left, 60, "the idle member to leave its group")
        # Kafka sees the member leave as its close begins; the ingress counts it out when its
        # close has ended (offsets stored, client closed): moments later.
        wait_for(
            lambda: metric(http, "txcoord_rest_consumer_members ") == 1,
            30,
            "the closed member counted out",
        )
        (gone,) = a.ack([stale_receipt])
        assert (gone["acked"], gone["reason"]) == (False, "unknown_member")
        later = [f"b-{i}" for i in range(16)]
        b.got = []
        commit(config, later)
        pump([b], len(later), 180, members)
        assert sorted(m["transaction_id"] for m in b.got) == sorted(later)
        assert set(in_queue_order(b.got)) == set(range(QUEUES))  # every queue, a's too
        assert all(m["delivery_attempt"] == 1 for m in b.got)  # nothing a acked came again


# -- without an engine: limits, conflicts, auth, bad input ---------------------------------


def test_members_are_capped_per_group_and_in_all_and_keep_their_subscription(
    consumer_topics: Config,
) -> None:
    config = consumer_topics
    members = ConsumerMembers(config, max_members=2, per_group=1)
    with TestClient(create_app(config, consumers=members), base_url=LOCAL) as client:
        one = RestConsumer(client, "g1", member="m1")
        assert one.receive(wait=0) == []
        over = client.post("/v1/consumer-groups/g1/receive", json={"topic": TOPIC, "member": "m2"})
        assert over.status_code == 429, over.text
        assert over.json()["error"] == "too_many_consumers"
        assert "'g1'" in over.json()["message"] and over.headers["retry-after"]
        assert RestConsumer(client, "g2", member="m3").receive(wait=0) == []
        full = client.post("/v1/consumer-groups/g3/receive", json={"topic": TOPIC})
        assert full.status_code == 429, full.text
        assert "all 2" in full.json()["message"]
        conflict = client.post(
            "/v1/consumer-groups/g1/receive", json={"topic": "Other", "member": "m1"}
        )
        assert conflict.status_code == 409, conflict.text
        assert conflict.json()["error"] == "subscription_conflict"
        conflict = client.post(
            "/v1/consumer-groups/g1/receive",
            json={"topic": TOPIC, "member": "m1", "tag_expression": "A"},
        )
        assert conflict.status_code == 409, conflict.text
        # The same subscription, spelt otherwise, is the same member.
        assert one.receive(wait=0, tag_expression=" * ") == []
        assert metric(client, "txcoord_rest_consumer_members ") == 2
        assert members.members() == [("g1", "m1"), ("g2", "m3")]
        (unknown,) = RestConsumer(client, "g1").ack(["x"], member="nobody")
        assert unknown == {"receipt": "x", "acked": False, "reason": "invalid_receipt"}
    assert members.members() == []  # the app's end closed them


def test_a_waiting_receive_holds_a_long_poll_slot_not_a_worker(consumer_topics: Config) -> None:
    config = consumer_topics
    slots = PollSlots(total=4, per_group=1)
    app = create_app(config, poll_slots=slots)
    with serving(app) as url, httpx.Client(base_url=url, timeout=60) as http:
        c = RestConsumer(http, "waiter", member="w1")
        assert c.receive(wait=0) == []  # started: the next receive only waits
        waiting: list[Any] = []
        thread = threading.Thread(target=lambda: waiting.append(c.receive(wait=4)))
        thread.start()
        wait_for(lambda: slots.held("consumer-group:waiter") == 1, 10, "the receive to wait")
        second = http.post(
            "/v1/consumer-groups/waiter/receive", json={"topic": TOPIC, "member": "w1"}
        )
        started = time.monotonic()
        acked = c.http.post(
            "/v1/consumer-groups/waiter/ack", json={"member": "w1", "receipts": ["x"]}
        )
        quick = time.monotonic() - started
        thread.join(30)
    assert second.status_code == 429 and second.json()["error"] == "too_many_polls"
    assert acked.status_code == 200 and quick < 2, (acked.text, quick)
    assert waiting == [[]]
    assert slots.total_held() == 0


AUTH_PATHS = [
    ("receive", {"topic": TOPIC}),
    ("ack", {"member": "m", "receipts": ["r"]}),
    ("change-invisible-duration", {"member": "m", "receipts": ["r"], "invisible_seconds": 1}),
]


@pytest.mark.parametrize(("action", "body"), AUTH_PATHS)
def test_tokens_consume_only_as_their_grants(
    auth_client: TestClient, action: str, body: dict[str, Any]
) -> None:
    """A token consumes as the consumer groups it is granted, never as its producer group."""
    path = f"/v1/consumer-groups/{{}}/{action}"
    missing = auth_client.post(path.format("billing-readers"), json=body)
    assert missing.status_code == 401 and missing.json()["error"] == "unauthorized"
    wrong = auth_client.post(path.format("billing-readers"), json=body, headers=bearer("nope"))
    assert wrong.status_code == 401
    refused = [
        (ORDERS_TOKEN, "orders", "not the consumer group of the same name"),  # its producer group
        (ORDERS_TOKEN, "billing-readers", '[[token.consume]] group = "billing-readers"'),
        (BILLING_TOKEN, "billing", "may not consume as consumer group 'billing'"),
        (LEDGER_TOKEN, "billing-readers", "token 'ledger' may not consume"),
    ]
    for token, group, says in refused:
        other = auth_client.post(path.format(group), json=body, headers=bearer(token))
        assert other.status_code == 403, other.text
        assert other.json()["error"] == "forbidden", other.text
        assert other.json()["message"].startswith("group (path): "), other.text
        assert says in other.json()["message"], other.text
    if action == "receive":  # a granted group, a topic not granted
        for token, group in ((BILLING_TOKEN, "billing-readers"), (LEDGER_TOKEN, "ledger")):
            answer = auth_client.post(
                path.format(group), json={"topic": "Refunds"}, headers=bearer(token)
            )
            assert answer.status_code == 403, answer.text
            assert answer.json()["message"].startswith("topic: "), answer.text
            assert "not 'Refunds'" in answer.json()["message"], answer.text
    else:  # acks touch no Kafka: the allowed calls answer in full
        allowed = [
            (BILLING_TOKEN, "billing-readers"),
            (LEDGER_TOKEN, "ledger"),
            (LEDGER_TOKEN, "audit"),
            (ADMIN_TOKEN, "anything"),
        ]
        for token, group in allowed:
            ok = auth_client.post(path.format(group), json=body, headers=bearer(token))
            assert ok.status_code == 200, ok.text
            assert ok.json()["results"][0]["reason"] == "invalid_receipt"


def test_an_ack_needs_the_topic_its_member_reads(consumer_topics: Config, tmp_path: Path) -> None:
    """A grant of the group on other topics does not settle a member that reads this one."""
    config = consumer_topics
    auth = Authenticator(load_token_file(write_auth_file(tmp_path / "tokens.toml")))
    with TestClient(create_app(config, auth=auth), base_url=LOCAL) as client:
        admin = client.post(
            "/v1/consumer-groups/ledger/receive",
            json={"topic": "Refunds", "member": "m1", "wait_seconds": 0},
            headers=bearer(ADMIN_TOKEN),
        )
        assert admin.status_code == 200, admin.text
        for action, extra in (("ack", {}), ("change-invisible-duration", {"invisible_seconds": 0})):
            answer = client.post(
                f"/v1/consumer-groups/ledger/{action}",
                json={"member": "m1", "receipts": ["r"], **extra},
                headers=bearer(LEDGER_TOKEN),
            )
            assert answer.status_code == 403, answer.text
            assert answer.json()["message"].startswith("member 'm1' (its topic): token 'ledger'")
            assert "not 'Refunds'" in answer.json()["message"]
        # Its own member of the group, on a granted topic: settled as usual.
        own = client.post(
            "/v1/consumer-groups/ledger/receive",
            json={"topic": TOPIC, "member": "m2", "wait_seconds": 0},
            headers=bearer(LEDGER_TOKEN),
        )
        assert own.status_code == 200, own.text
        answer = client.post(
            "/v1/consumer-groups/ledger/ack",
            json={"member": "m2", "receipts": ["r"]},
            headers=bearer(LEDGER_TOKEN),
        )
        assert answer.status_code == 200, answer.text


RECEIVE_400 = [
    ({}, "topic"),
    ({"topic": "system"}, "topic"),
    ({"topic": "a/b"}, "topic"),
    ({"topic": TOPIC, "tag_expression": "A ||"}, "tag_expression"),
    ({"topic": TOPIC, "tag_expression": "A || *"}, "tag_expression"),
    ({"topic": TOPIC, "max_messages": 0}, "max_messages"),
    ({"topic": TOPIC, "max_messages": 33}, "max_messages"),
    ({"topic": TOPIC, "max_messages": "4"}, "max_messages"),
    ({"topic": TOPIC, "wait_seconds": -1}, "wait_seconds"),
    ({"topic": TOPIC, "wait_seconds": 31}, "wait_seconds"),
    ({"topic": TOPIC, "invisible_seconds": 0}, "invisible_seconds"),
    ({"topic": TOPIC, "invisible_seconds": True}, "invisible_seconds"),
    ({"topic": TOPIC, "member": "a b"}, "member"),
    ({"topic": TOPIC, "member": ""}, "member"),
    ({"topic": TOPIC, "start_from": "middle"}, "start_from"),
    ({"topic": TOPIC, "orderly": "yes"}, "orderly"),
    ({"topic": TOPIC, "bodyBase64": "x"}, "bodyBase64"),
]


@pytest.mark.parametrize(("body", "field"), RECEIVE_400)
def test_bad_receive_bodies_are_400_naming_the_field(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    answer = client.post("/v1/consumer-groups/g/receive", json=body)
    assert answer.status_code == 400, answer.text
    assert field in answer.json()["message"], answer.json()


@pytest.mark.parametrize(
    ("action", "body", "field"),
    [
        ("ack", {"receipts": ["r"]}, "member"),
        ("ack", {"member": "m", "receipts": []}, "receipts"),
        ("ack", {"member": "m", "receipts": [1]}, "receipts[0]"),
        ("ack", {"member": "m", "receipts": ["r" * 5000]}, "receipts[0]"),
        ("ack", {"member": "m", "receipts": ["r"] * 1001}, "receipts"),
        ("change-invisible-duration", {"member": "m", "receipts": ["r"]}, "invisible_seconds"),
        (
            "change-invisible-duration",
            {"member": "m", "receipts": ["r"], "invisible_seconds": -1},
            "invisible_seconds",
        ),
    ],
)
def test_bad_ack_bodies_are_400_naming_the_field(
    client: TestClient, action: str, body: dict[str, Any], field: str
) -> None:
    answer = client.post(f"/v1/consumer-groups/g/{action}", json=body)
    assert answer.status_code == 400, answer.text
    assert field in answer.json()["message"], answer.json()


@pytest.mark.parametrize("group", ["a%20b", "x" * 256, "a%0A"])
def test_bad_group_names_are_400(client: TestClient, group: str) -> None:
    answer = client.post(f"/v1/consumer-groups/{group}/receive", json={"topic": TOPIC})
    assert answer.status_code == 400, answer.text
    assert "group (path)" in answer.json()["message"]


def test_receipts_are_opaque_signed_and_bound_to_their_key() -> None:
    codec = ReceiptCodec()
    receipt = Receipt("Billing", 3, 41, 7, 1)
    text = codec.encode("billing", "m1", "inc", receipt)
    issued = codec.decode(text)
    assert issued is not None
    assert (issued.group, issued.member, issued.incarnation) == ("billing", "m1", "inc")
    assert issued.receipt == receipt
    assert "Billing" not in text and "billing" not in text
    version, payload, mac = text.split(".")
    other = ReceiptCodec().encode("billing", "m1", "inc", Receipt("Billing", 3, 42, 7, 1))
    spliced = ".".join([version, other.split(".")[1], mac])  # another offset, this mac
    for bad in (spliced, text + "x", f"r1.{payload}.{mac}", "", "..", "r2.%%.%%", text[:-1]):
        assert codec.decode(bad) is None, bad
    assert ReceiptCodec().decode(text) is None  # another process's key
