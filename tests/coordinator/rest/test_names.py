"""contract 9: names match as whole strings (no trailing newline, no control character), and a
check immunity above max_check_immunity is refused; nothing refused reaches Kafka."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from tests.coordinator.rest.conftest import LOCAL, drop_topics, make_rest_config
from tests.coordinator.rest.kafka_io import OffsetWatch

pytestmark = pytest.mark.kafka

#: Endings that a `re.match(...$)` lets through, and control characters inside a name.
BAD_ENDINGS = ["\n", "\r\n", "\x00", "\x1f", "\x7f", "\t"]
BAD_MIDDLES = ["a\nb", "a\x00b", "a\x1bb"]


@pytest.fixture(scope="module")
def config(bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Config]:
    config = make_rest_config(
        bootstrap_servers, tmp_path_factory.mktemp("names"), max_check_immunity="1h"
    )
    try:
        yield config
    finally:
        drop_topics(config)


@pytest.fixture(scope="module")
def client(config: Config) -> Iterator[TestClient]:
    with TestClient(
        create_app(config), base_url=LOCAL, raise_server_exceptions=False
    ) as test_client:
        yield test_client


class BeforeAndAfter(OffsetWatch):
    """End offsets, with the ones the running test began with."""

    def __init__(self, bootstrap_servers: str, topics: list[str]) -> None:
        super().__init__(bootstrap_servers, topics)
        self.before: dict[tuple[str, int], int] = {}


@pytest.fixture(scope="module")
def watch(config: Config) -> Iterator[BeforeAndAfter]:
    offsets = BeforeAndAfter(
        config.kafka.bootstrap_servers, [config.kafka.half_topic, config.kafka.op_topic]
    )
    try:
        yield offsets
    finally:
        offsets.close()


@pytest.fixture(autouse=True)
def _mark(watch: BeforeAndAfter) -> None:
    watch.before = watch.snapshot()


def half(**fields: Any) -> dict[str, Any]:
    return {"producer_group": "orders", "topic": "OrderPaid", "body": "x", **fields}


def bad_names() -> list[str]:
    return [f"ok{end}" for end in BAD_ENDINGS] + BAD_MIDDLES


def refused(answer: Any, watch: BeforeAndAfter, field: str) -> None:
    """Assert a 4xx JSON error naming `field`, and that Kafka did not move since the test began."""
    assert 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    body = answer.json()
    assert set(body) == {"error", "message"}
    assert field in body["message"], body
    assert watch.snapshot() == watch.before, "a refused request wrote to Kafka"


@pytest.mark.parametrize("name", bad_names(), ids=repr)
def test_a_name_with_a_newline_or_control_character_is_refused_in_every_field(
    client: TestClient, watch: BeforeAndAfter, name: str
) -> None:
    posts: list[tuple[str, dict[str, Any], str]] = [
        ("/v1/transactions", half(topic=name), "topic"),
        ("/v1/transactions", half(producer_group=name), "producer_group"),
        ("/v1/transactions", half(transaction_id=name), "transaction_id"),
        ("/v1/transactions", half(properties={name: "v"}), "properties"),
        ("/v1/transactions/batch", {"messages": [half(), half(topic=name)]}, "messages[1].topic"),
        ("/v1/transactions/t/commit", {"producer_group": name}, "producer_group"),
        ("/v1/ops/batch",
         {"ops": [{"transaction_id": name, "op": "COMMIT", "producer_group": "orders"}]},
         "ops[0].transaction_id"),
        ("/v1/ops/batch",
         {"ops": [{"transaction_id": "t", "op": "COMMIT", "producer_group": name}]},
         "ops[0].producer_group"),
    ]  # fmt: skip
    for path, body, field in posts:
        refused(client.post(path, json=body), watch, field)
    quoted = quote(name, safe="")
    refused(
        client.post(f"/v1/transactions/{quoted}/commit", json={"producer_group": "orders"}),
        watch,
        "transaction_id",
    )
    refused(client.get(f"/v1/transactions/{quoted}"), watch, "transaction_id")
    refused(client.get(f"/v1/transactions/t?producer_group={quoted}"), watch, "producer_group")
    refused(
        client.get(f"/v1/check-requests?producer_group={quoted}&wait_seconds=0"),
        watch,
        "producer_group",
    )


def test_the_same_names_without_the_bad_characters_are_accepted(client: TestClient) -> None:
    answer = client.post("/v1/transactions", json=half(transaction_id="ok", properties={"ok": "v"}))
    assert answer.status_code == 201, answer.text


def test_an_immunity_above_max_check_immunity_is_refused(
    client: TestClient, watch: BeforeAndAfter, config: Config
) -> None:
    limit = int(config.max_check_immunity.total_seconds())
    for value in (limit + 1, 2**31 - 1):
        answer = client.post("/v1/transactions", json=half(check_immunity_seconds=value))
        refused(answer, watch, "max_check_immunity")
        assert "check_immunity_seconds" in answer.json()["message"]
        batch = {"messages": [half(), half(check_immunity_seconds=value)]}
        refused(
            client.post("/v1/transactions/batch", json=batch),
            watch,
            "messages[1].check_immunity_seconds",
        )


def test_an_immunity_of_exactly_max_check_immunity_is_accepted(
    client: TestClient, config: Config
) -> None:
    limit = int(config.max_check_immunity.total_seconds())
    answer = client.post("/v1/transactions", json=half(check_immunity_seconds=limit))
    assert answer.status_code == 201, answer.text
