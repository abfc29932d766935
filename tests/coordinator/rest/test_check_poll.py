"""GET /v1/check-requests: long polls on the real check topic, filtered by producer group."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kafka import KafkaProducer

from coordinator.core.config import Config
from coordinator.protocol import ingress as fmt
from coordinator.rest.app import create_app
from coordinator.rest.routes import DEFAULT_WAIT_SECONDS
from streams.query.batch_writer import check_record
from tests.coordinator.rest.conftest import LOCAL

pytestmark = pytest.mark.kafka


def check_row(tx: str, group: str, number: int = 1) -> dict[str, Any]:
    """Return a CHECK row as the coordinator's stateful stage emits it."""
    return {
        "transaction_id": tx, "msg_id": f"MSG-{tx}", "producer_group": group,
        "topic": "OrderPaid", "queue_id": 1, "body": b"\x00body", "keys": ["k1"], "tags": "t",
        "properties": {"p": "v"}, "check_number": number, "prepared_ms": 1_000,
        "at_ms": 7_000 + number,
    }  # fmt: skip


def publish(config: Config, rows: list[dict[str, Any]]) -> None:
    """Publish check requests exactly as streams/query/batch_writer.py does."""
    producer = KafkaProducer(bootstrap_servers=config.kafka.bootstrap_servers, acks="all")
    try:
        for row in rows:
            key, value, headers = check_record(row)
            producer.send(config.kafka.check_topic, key=key, value=value, headers=headers)
        producer.flush(30)
    finally:
        producer.close()


def poll(
    client: TestClient,
    group: str,
    max_records: int = 100,
    wait: float = 10,
    instance: str | None = None,
) -> list[Any]:
    params: dict[str, Any] = {"producer_group": group, "max": max_records, "wait_seconds": wait}
    if instance is not None:
        params["producer_instance"] = instance
    answer = client.get("/v1/check-requests", params=params)
    assert answer.status_code == 200, answer.text
    found: list[Any] = answer.json()["check_requests"]
    return found


def poll_until(client: TestClient, group: str, count: int, timeout: float = 30) -> list[Any]:
    """Poll until `count` requests came (or the time is up); return them all."""
    found: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        found += poll(client, group, wait=5)
    return found


def test_a_group_gets_its_own_check_requests_only(client: TestClient, rest_config: Config) -> None:
    rows = [
        check_row("a1", "orders"),
        check_row("b1", "billing"),
        check_row("a2", "orders", 2),
        check_row("b2", "billing"),
    ]
    publish(rest_config, rows)
    orders = poll_until(client, "orders", 2)
    assert sorted(orders, key=lambda r: r["transaction_id"]) == [
        json.loads(check_record(row)[1]) for row in (rows[0], rows[2])
    ]
    assert orders[0]["body_base64"] == "AGJvZHk="
    billing = poll_until(client, "billing", 2)
    assert sorted(r["transaction_id"] for r in billing) == ["b1", "b2"]
    # Handed out once: the next poll waits and comes back empty.
    assert poll(client, "orders", wait=1) == []


def test_max_bounds_one_answer(client: TestClient, rest_config: Config) -> None:
    publish(rest_config, [check_row(f"c{i}", "orders") for i in range(7)])
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while len(seen) < 7 and time.monotonic() < deadline:
        batch = poll(client, "orders", max_records=2, wait=5)
        assert len(batch) <= 2
        seen += [r["transaction_id"] for r in batch]
    assert sorted(seen) == [f"c{i}" for i in range(7)]


def test_an_empty_poll_waits_then_answers_an_empty_list(
    client: TestClient, rest_config: Config
) -> None:
    """The wait asked is honoured: never an answer before it is over, and not the longest
    wait instead.

    It is longer than the default wait, so a poll that fell back to the default answers too
    soon: the exact lower bound catches that, whatever the load. Above it, a loaded machine
    has the 18 s up to the longest wait."""
    wait = DEFAULT_WAIT_SECONDS + 2
    longest = rest_config.rest.check_poll_max_wait.total_seconds()
    poll(client, "quiet", wait=0)  # joins the consumer group
    started = time.monotonic()
    assert poll(client, "quiet", wait=wait) == []
    elapsed = time.monotonic() - started
    assert wait <= elapsed < longest, elapsed


def test_a_poll_answers_as_soon_as_a_request_arrives(
    client: TestClient, rest_config: Config
) -> None:
    poll(client, "orders", wait=0)  # joins the consumer group
    timer = threading.Timer(1.0, publish, args=(rest_config, [check_row("late", "orders")]))
    # The longest wait there is: answered with the request, so before the wait is over.
    # Publishing and fetching it takes a second or two, a loaded machine's few more.
    wait = rest_config.rest.check_poll_max_wait.total_seconds()
    started = time.monotonic()
    timer.start()
    try:
        found = poll(client, "orders", wait=wait)
    finally:
        timer.join()
    assert [r["transaction_id"] for r in found] == ["late"]
    assert time.monotonic() - started < wait - 10


def test_handed_out_requests_are_not_handed_out_again_after_a_restart(
    rest_config: Config,
) -> None:
    publish(rest_config, [check_row("r1", "orders"), check_row("r2", "orders")])
    with TestClient(create_app(rest_config), base_url=LOCAL) as first:
        assert sorted(r["transaction_id"] for r in poll_until(first, "orders", 2)) == ["r1", "r2"]
    publish(rest_config, [check_row("r3", "orders")])
    with TestClient(create_app(rest_config), base_url=LOCAL) as second:
        assert [r["transaction_id"] for r in poll_until(second, "orders", 1)] == ["r3"]
        assert poll(second, "orders", wait=1) == []


def test_pollers_of_one_group_share_the_requests(client: TestClient, rest_config: Config) -> None:
    poll(client, "orders", wait=0)
    publish(rest_config, [check_row(f"s{i}", "orders") for i in range(30)])
    seen: list[list[str]] = [[], [], []]

    def poller(mine: list[str]) -> None:
        deadline = time.monotonic() + 30
        while sum(map(len, seen)) < 30 and time.monotonic() < deadline:
            mine += [r["transaction_id"] for r in poll(client, "orders", max_records=4, wait=2)]

    threads = [threading.Thread(target=poller, args=(mine,)) for mine in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [tx for mine in seen for tx in mine]
    assert sorted(everything) == sorted(f"s{i}" for i in range(30))  # each exactly once


def sent_by(tx: str, instance: str) -> dict[str, Any]:
    """Return the CHECK row of a half that producer instance `instance` sent."""
    return check_row(tx, "orders") | {"properties": {fmt.PRODUCER_INSTANCE_PROPERTY: instance}}


def test_a_check_goes_first_to_a_poll_of_the_instance_that_sent_its_half(
    client: TestClient, rest_config: Config
) -> None:
    delay = rest_config.rest.check_sender_first.total_seconds()
    assert delay > 0
    publish(rest_config, [sent_by("r1", "a"), check_row("r2", "orders")])
    # Another instance's poll gets the check that names nobody, not a's.
    others = poll(client, "orders", wait=5, instance="b")
    assert [r["transaction_id"] for r in others] == ["r2"]
    mine = poll(client, "orders", wait=5, instance="a")
    assert [(r["transaction_id"], r["producer_instance"]) for r in mine] == [("r1", "a")]
    # A sender that does not poll: anyone gets its check, once the delay is over.
    publish(rest_config, [sent_by("r3", "gone")])
    started = time.monotonic()
    found = poll_until(client, "orders", 1, timeout=delay + 20)
    waited = time.monotonic() - started
    assert [r["transaction_id"] for r in found] == ["r3"]
    assert waited >= delay - 0.5, waited
    assert poll(client, "orders", wait=1, instance="gone") == []  # handed out once


def test_a_poll_naming_a_malformed_instance_is_refused(client: TestClient) -> None:
    answer = client.get(
        "/v1/check-requests",
        params={"producer_group": "orders", "producer_instance": "a b", "wait_seconds": 0},
    )
    assert answer.status_code == 400, answer.text
    assert "producer instance" in answer.text
