"""contract 9: every malformed request gets a 4xx JSON error and writes nothing to Kafka.

One app (open mode, small sizes) serves the whole module; after every case the end offsets
of the half and op topics are still zero: nothing in this module may be written.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from coordinator.rest.records import HEADER_BUDGET
from tests.coordinator.rest.conftest import LOCAL, drop_topics, make_rest_config
from tests.coordinator.rest.kafka_io import OffsetWatch

pytestmark = pytest.mark.kafka

MAX_MESSAGE = 64 * 1024
MAX_REQUEST = 512 * 1024


@pytest.fixture(scope="module")
def config(bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Config]:
    config = make_rest_config(
        bootstrap_servers,
        tmp_path_factory.mktemp("bad-input"),
        max_message_size=str(MAX_MESSAGE),
        **{"rest.max_request_size": str(MAX_REQUEST), "rest.check_poll_max_wait": "2s"},
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


@pytest.fixture(scope="module")
def watch(config: Config) -> Iterator[OffsetWatch]:
    offsets = OffsetWatch(
        config.kafka.bootstrap_servers, [config.kafka.half_topic, config.kafka.op_topic]
    )
    try:
        yield offsets
    finally:
        offsets.close()


def half(**fields: Any) -> dict[str, Any]:
    """Return a valid half request with `fields` changed (None removes a field)."""
    base: dict[str, Any] = {"producer_group": "orders", "topic": "OrderPaid", "body": "x"}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def raw(document: Any) -> bytes:
    """Return `document` as JSON bytes, lone surrogates kept as \\u escapes."""
    return json.dumps(document).encode()


def refused(
    client: TestClient,
    watch: OffsetWatch,
    method: str,
    path: str,
    *,
    content: bytes | None,
    status: int,
    code: str,
    names: str = "",
    content_type: str | None = "application/json",
) -> None:
    """Send one request; assert its error answer and that Kafka did not move."""
    headers = {"content-type": content_type} if content_type else {}
    answer = client.request(method, path, content=content, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert set(body) == {"error", "message"}
    assert body["error"] == code, body
    assert names in body["message"], body
    assert set(watch.snapshot().values()) == {0}, "a refused request wrote to Kafka"


SEND_CASES: list[tuple[str, bytes, int, str, str]] = [
    # (case, body, status, code, text the message must contain)
    ("bad json", b'{"producer_group": ', 400, "bad_json", "not valid JSON"),
    ("trailing garbage", b'{"producer_group": "g"} x', 400, "bad_json", "JSON"),
    ("not utf-8", b'{"producer_group": "\xff\xfe"}', 400, "bad_json", ""),
    ("empty body", b"", 400, "invalid_request", "body"),
    ("json null", b"null", 400, "invalid_request", "body"),
    ("json array", b"[]", 400, "invalid_request", "body"),
    ("json string", b'"hello"', 400, "invalid_request", "body"),
    ("missing group", raw(half(producer_group=None)), 400, "invalid_request", "producer_group"),
    ("missing topic", raw(half(topic=None)), 400, "invalid_request", "topic"),
    ("group not a string", raw(half(producer_group=5)), 400, "invalid_request", "producer_group"),
    ("topic not a string", raw(half(topic=5)), 400, "invalid_request", "topic"),
    ("queue id a string", raw(half(queue_id="1")), 400, "invalid_request", "queue_id"),
    ("queue id a float", raw(half(queue_id=1.0)), 400, "invalid_request", "queue_id"),
    ("queue id a bool", raw(half(queue_id=True)), 400, "invalid_request", "queue_id"),
    ("queue id negative", raw(half(queue_id=-1)), 400, "invalid_request", "queue_id"),
    ("queue id too big", raw(half(queue_id=1024)), 400, "invalid_request", "queue_id"),
    ("queue id huge", raw(half(queue_id=10**30)), 400, "invalid_request", "queue_id"),
    ("body a number", raw(half(body=5)), 400, "invalid_request", "body"),
    ("body an object", raw(half(body={"a": 1})), 400, "invalid_request", "body"),
    ("base64 a number", raw(half(body=None, body_base64=5)), 400, "invalid_request", "body_base64"),
    ("base64 invalid", raw(half(body=None, body_base64="!!!!")), 400, "invalid_request", "base64"),
    ("base64 unpadded", raw(half(body=None, body_base64="YWJ")), 400, "invalid_request", "base64"),
    ("both bodies", raw(half(body_base64="eA==")), 400, "invalid_request", "at most one"),
    ("keys a string", raw(half(keys="k")), 400, "invalid_request", "keys"),
    ("keys of numbers", raw(half(keys=[1])), 400, "invalid_request", "keys[0]"),
    ("keys with null", raw(half(keys=["a", None])), 400, "invalid_request", "keys[1]"),
    ("tags a list", raw(half(tags=["a"])), 400, "invalid_request", "tags"),
    ("properties a list", raw(half(properties=[])), 400, "invalid_request", "properties"),
    ("property a number", raw(half(properties={"a": 1})), 400, "invalid_request", "properties.a"),
    ("property null", raw(half(properties={"a": None})), 400, "invalid_request", "properties.a"),
    ("property name empty", raw(half(properties={"": "v"})), 400, "invalid_request", "properties"),
    ("property name control", raw(half(properties={"a\nb": "v"})), 400, "invalid_request",
     "properties"),
    ("transaction id a number", raw(half(transaction_id=5)), 400, "invalid_request",
     "transaction_id"),
    ("transaction id empty", raw(half(transaction_id="")), 400, "invalid_request",
     "transaction_id"),
    ("transaction id leading space", raw(half(transaction_id=" a")), 400, "invalid_request",
     "transaction_id"),
    ("transaction id too long", raw(half(transaction_id="x" * 129)), 400, "invalid_request",
     "transaction_id"),
    ("transaction id with tab", raw(half(transaction_id="a\tb")), 400, "invalid_request",
     "transaction_id"),
    ("transaction id with newline", raw(half(transaction_id="ab\n")), 400, "invalid_request",
     "transaction_id"),
    ("transaction id not ascii", raw(half(transaction_id="é")), 400, "invalid_request",
     "transaction_id"),
    ("group empty", raw(half(producer_group="")), 400, "invalid_request", "producer_group"),
    ("group with space", raw(half(producer_group="a b")), 400, "invalid_request",
     "producer_group"),
    ("group too long", raw(half(producer_group="g" * 256)), 400, "invalid_request",
     "producer_group"),
    ("immunity a string", raw(half(check_immunity_seconds="5")), 400, "invalid_request",
     "check_immunity_seconds"),
    ("immunity a bool", raw(half(check_immunity_seconds=True)), 400, "invalid_request",
     "check_immunity_seconds"),
    ("immunity a float", raw(half(check_immunity_seconds=1.5)), 400, "invalid_request",
     "check_immunity_seconds"),
    ("immunity negative", raw(half(check_immunity_seconds=-1)), 400, "invalid_request",
     "check_immunity_seconds"),
    ("immunity beyond int32", raw(half(check_immunity_seconds=2**31)), 400, "invalid_request",
     "check_immunity_seconds"),
    ("unknown field", raw(half(bodyBase64="eA==")), 400, "invalid_request", "bodyBase64"),
    ("a producer clock", raw(half(born_at=0)), 400, "invalid_request", "born_at"),
    ("a store time", raw(half(stored_at="2000-01-01T00:00:00Z")), 400, "invalid_request",
     "stored_at"),
    # Topics: RocketMQ's alphabet, no path escapes, no system names.
    ("topic path escape", raw(half(topic="../escape")), 400, "invalid_topic", "topic"),
    ("topic with slash", raw(half(topic="a/b")), 400, "invalid_topic", "topic"),
    ("topic with dot", raw(half(topic="a.b")), 400, "invalid_topic", "topic"),
    ("topic empty", raw(half(topic="")), 400, "invalid_topic", "topic"),
    ("topic too long", raw(half(topic="t" * 128)), 400, "invalid_topic", "topic"),
    ("topic with space", raw(half(topic="a b")), 400, "invalid_topic", "topic"),
    ("topic system", raw(half(topic="system")), 400, "invalid_topic", "system topic"),
    ("topic rmq half", raw(half(topic="RMQ_SYS_TRANS_HALF_TOPIC")), 400, "invalid_topic",
     "system topic"),
    ("topic retry prefix", raw(half(topic="%RETRY%orders")), 400, "invalid_topic",
     "letters, digits"),
    # delta-rs and object_store percent-decode a table's path: each addressed another table.
    ("topic %2e%2e", raw(half(topic="%2e%2e")), 400, "invalid_topic", "letters, digits"),
    ("topic %41", raw(half(topic="%41")), 400, "invalid_topic", "letters, digits"),
    ("topic Payment%73", raw(half(topic="Payment%73")), 400, "invalid_topic", "letters, digits"),
    ("topic a%2fb", raw(half(topic="a%2fb")), 400, "invalid_topic", "letters, digits"),
    ("topic with bar", raw(half(topic="a|b")), 400, "invalid_topic", "letters, digits"),
    ("group with percent", raw(half(producer_group="or%64ers")), 400, "invalid_request",
     "producer_group"),
    ("topic TBW102", raw(half(topic="TBW102")), 400, "invalid_topic", "system topic"),
    # JSON may carry a lone surrogate; no UTF-8 encoder accepts one.
    ("surrogate body", b'{"producer_group": "g", "topic": "T", "body": "\\ud800"}', 400,
     "invalid_request", "body"),
    ("surrogate tags", b'{"producer_group": "g", "topic": "T", "tags": "a\\udfff"}', 400,
     "invalid_request", "tags"),
    ("surrogate key", b'{"producer_group": "g", "topic": "T", "keys": ["\\ud83d"]}', 400,
     "invalid_request", "keys[0]"),
    ("surrogate property name", b'{"producer_group": "g", "topic": "T", '
     b'"properties": {"\\udc00": "v"}}', 400, "invalid_request", "properties"),
    ("surrogate property value", b'{"producer_group": "g", "topic": "T", '
     b'"properties": {"p": "\\udc00"}}', 400, "invalid_request", "properties.p"),
    ("surrogate topic", b'{"producer_group": "g", "topic": "\\ud800"}', 400, "invalid_request",
     "topic"),
    ("surrogate group", b'{"producer_group": "\\ud800", "topic": "T"}', 400, "invalid_request",
     "producer_group"),
    ("surrogate transaction id", b'{"producer_group": "g", "topic": "T", '
     b'"transaction_id": "\\ud800"}', 400, "invalid_request", "transaction_id"),
    ("deeply nested", b"[" * 100_000 + b"]" * 100_000, 400, "bad_json", ""),
    # Sizes.
    ("body one byte too large", raw(half(body="y" * (MAX_MESSAGE + 1))), 413, "too_large",
     "max_message_size"),
    ("multibyte body too large", raw(half(body="é" * (MAX_MESSAGE // 2 + 1))), 413, "too_large",
     "max_message_size"),
    ("base64 body too large",
     raw(half(body=None, body_base64=base64.b64encode(b"z" * (MAX_MESSAGE + 1)).decode())),
     413, "too_large", "body_base64"),
    ("headers over budget",
     raw(half(properties={f"p{i}": "v" * 1000 for i in range(HEADER_BUDGET // 1000 + 1)})),
     413, "too_large", "properties"),
    ("request too large", raw(half(tags="t" * MAX_REQUEST)), 413, "too_large",
     "rest.max_request_size"),
]  # fmt: skip


def case_name(case: tuple[Any, ...]) -> str:
    return str(case[0])


@pytest.mark.parametrize("case", SEND_CASES, ids=case_name)
def test_a_bad_half_is_refused(
    client: TestClient, watch: OffsetWatch, case: tuple[str, bytes, int, str, str]
) -> None:
    _, body, status, code, names = case
    refused(
        client,
        watch,
        "POST",
        "/v1/transactions",
        content=body,
        status=status,
        code=code,
        names=names,
    )


def test_a_body_that_is_not_json_is_415(client: TestClient, watch: OffsetWatch) -> None:
    body = raw(half())
    for content_type in ("text/plain", None, "application/x-www-form-urlencoded"):
        refused(
            client,
            watch,
            "POST",
            "/v1/transactions",
            content=body,
            status=415,
            code="unsupported_media_type",
            names="JSON",
            content_type=content_type,
        )


def test_a_chunked_request_too_large_is_413(client: TestClient, watch: OffsetWatch) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"producer_group": "g", "topic": "T", "tags": "'
        for _ in range(MAX_REQUEST // 1024 + 1):
            yield b"t" * 1024
        yield b'"}'

    answer = client.post(
        "/v1/transactions", content=chunks(), headers={"content-type": "application/json"}
    )
    assert answer.status_code == 413
    assert answer.json()["error"] == "too_large"
    assert set(watch.snapshot().values()) == {0}


BATCH_CASES: list[tuple[str, Any, int, str, str]] = [
    ("no messages field", {}, 400, "invalid_request", "messages"),
    ("messages not a list", {"messages": {}}, 400, "invalid_request", "messages"),
    ("empty batch", {"messages": []}, 400, "invalid_request", "messages"),
    ("too many", {"messages": [half()] * 1001}, 400, "invalid_request", "messages"),
    ("third item bad", {"messages": [half(), half(), half(queue_id=-5)]}, 400, "invalid_request",
     "messages[2].queue_id"),
    ("second item system topic", {"messages": [half(), half(topic="system")]}, 400,
     "invalid_topic", "messages[1].topic"),
    ("an item too large", {"messages": [half(), half(body="y" * (MAX_MESSAGE + 1))]}, 413,
     "too_large", "messages[1].body"),
    ("an item not an object", {"messages": [half(), 5]}, 400, "invalid_request", "messages[1]"),
]  # fmt: skip


@pytest.mark.parametrize("case", BATCH_CASES, ids=case_name)
def test_one_bad_item_refuses_the_whole_batch(
    client: TestClient, watch: OffsetWatch, case: tuple[str, Any, int, str, str]
) -> None:
    _, document, status, code, names = case
    refused(
        client,
        watch,
        "POST",
        "/v1/transactions/batch",
        content=raw(document),
        status=status,
        code=code,
        names=names,
    )


OP_CASES: list[tuple[str, str, Any, int, str, str]] = [
    ("missing group", "/v1/transactions/t/commit", {}, 400, "invalid_request", "producer_group"),
    ("bad group", "/v1/transactions/t/commit", {"producer_group": "a/b"}, 400, "invalid_request",
     "producer_group"),
    ("from_check a string", "/v1/transactions/t/rollback",
     {"producer_group": "g", "from_check": "true"}, 400, "invalid_request", "from_check"),
    ("from_check a number", "/v1/transactions/t/rollback",
     {"producer_group": "g", "from_check": 1}, 400, "invalid_request", "from_check"),
    ("unknown field", "/v1/transactions/t/commit", {"producer_group": "g", "op": "COMMIT"}, 400,
     "invalid_request", "op"),
    ("reason without operator", "/v1/transactions/t/commit",
     {"producer_group": "g", "reason": "why"}, 400, "invalid_request", "operator"),
    ("id too long", f"/v1/transactions/{'x' * 129}/commit", {"producer_group": "g"}, 400,
     "invalid_request", "transaction_id"),
    ("id not ascii", "/v1/transactions/%C3%A9/commit", {"producer_group": "g"}, 400,
     "invalid_request", "transaction_id"),
    ("id not utf-8", "/v1/transactions/%FF/commit", {"producer_group": "g"}, 400,
     "invalid_request", "transaction_id"),
    # GET /v1/transactions/{id} takes ids with slashes: "t/maybe" is an id that cannot be POSTed.
    ("unknown op", "/v1/transactions/t/maybe", {"producer_group": "g"}, 405, "method_not_allowed",
     "POST"),
    ("batch empty", "/v1/ops/batch", {"ops": []}, 400, "invalid_request", "ops"),
    ("batch unknown op", "/v1/ops/batch",
     {"ops": [{"transaction_id": "t", "op": "COMMIT", "producer_group": "g"},
              {"transaction_id": "t", "op": "MAYBE", "producer_group": "g"}]}, 400,
     "invalid_request", "ops[1].op"),
    ("batch missing id", "/v1/ops/batch", {"ops": [{"op": "COMMIT", "producer_group": "g"}]}, 400,
     "invalid_request", "ops[0].transaction_id"),
    ("batch lowercase op", "/v1/ops/batch",
     {"ops": [{"transaction_id": "t", "op": "commit", "producer_group": "g"}]}, 400,
     "invalid_request", "ops[0].op"),
]  # fmt: skip


@pytest.mark.parametrize("case", OP_CASES, ids=case_name)
def test_a_bad_op_is_refused(
    client: TestClient, watch: OffsetWatch, case: tuple[str, str, Any, int, str, str]
) -> None:
    _, path, document, status, code, names = case
    refused(
        client, watch, "POST", path, content=raw(document), status=status, code=code, names=names
    )


QUERY_CASES: list[tuple[str, str, int, str, str]] = [
    ("no group", "/v1/check-requests", 400, "invalid_request", "producer_group"),
    ("bad group", "/v1/check-requests?producer_group=a%20b", 400, "invalid_request",
     "producer_group"),
    ("max zero", "/v1/check-requests?producer_group=g&max=0", 400, "invalid_request", "max"),
    ("max too big", "/v1/check-requests?producer_group=g&max=501", 400, "invalid_request", "max"),
    ("max not a number", "/v1/check-requests?producer_group=g&max=x", 400, "invalid_request",
     "max"),
    ("wait negative", "/v1/check-requests?producer_group=g&wait_seconds=-1", 400,
     "invalid_request", "wait_seconds"),
    ("wait beyond the maximum", "/v1/check-requests?producer_group=g&wait_seconds=3", 400,
     "invalid_request", "wait_seconds"),
    ("wait nan", "/v1/check-requests?producer_group=g&wait_seconds=nan", 400, "invalid_request",
     "wait_seconds"),
    ("lookup id too long", f"/v1/transactions/{'x' * 129}", 400, "invalid_request",
     "transaction_id"),
    ("unknown transaction", "/v1/transactions/never-sent", 404, "not_found", "never-sent"),
    ("unknown path", "/v2/transactions", 404, "not_found", "/v2/transactions"),
]  # fmt: skip


@pytest.mark.parametrize("case", QUERY_CASES, ids=case_name)
def test_a_bad_query_is_refused(
    client: TestClient, watch: OffsetWatch, case: tuple[str, str, int, str, str]
) -> None:
    _, path, status, code, names = case
    refused(
        client,
        watch,
        "GET",
        path,
        content=None,
        status=status,
        code=code,
        names=names,
        content_type=None,
    )


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("DELETE", "/v1/transactions"),
        ("PUT", "/v1/transactions/t/commit"),
        ("POST", "/v1/check-requests"),
        ("POST", "/v1/transactions/t"),
    ],
)
def test_a_wrong_method_is_405(
    client: TestClient, watch: OffsetWatch, method: str, path: str
) -> None:
    refused(
        client,
        watch,
        method,
        path,
        content=None,
        status=405,
        code="method_not_allowed",
        names=method,
        content_type=None,
    )


def test_with_auto_create_off_a_topic_outside_the_list_is_refused(
    bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = make_rest_config(
        bootstrap_servers,
        tmp_path_factory.mktemp("topics"),
        auto_create_topic_enable="false",
        topics="OrderPaid,Refunds",
    )
    watch = OffsetWatch(config.kafka.bootstrap_servers, [config.kafka.half_topic])
    try:
        with TestClient(create_app(config), base_url=LOCAL) as client:
            refused(
                client,
                watch,
                "POST",
                "/v1/transactions",
                content=json.dumps({"producer_group": "g", "topic": "Sprawl-1"}).encode(),
                status=400,
                code="topic_not_allowed",
                names="auto_create_topic_enable",
            )
            batch = {"messages": [{"producer_group": "g", "topic": "OrderPaid"},
                                  {"producer_group": "g", "topic": "Sprawl-2"}]}  # fmt: skip
            answer = client.post("/v1/transactions/batch", json=batch)
            assert (answer.status_code, answer.json()["error"]) == (400, "topic_not_allowed")
            assert "messages[1].topic" in answer.json()["message"]
            sent = client.post("/v1/transactions", json={"producer_group": "g", "topic": "Refunds"})
            assert sent.status_code == 201, sent.text
    finally:
        watch.close()
        drop_topics(config)
