"""The REST transport against a small real HTTP server that answers what each test scripts.

These pin the client side of the REST ingress (contract 5.1): paths, bodies, the bearer token, error
mapping (4xx -> RequestRejectedError with the contract's code) and the retry policy (only
connection failures, 503 and 429, with backoff). test_rest_ingress.py runs the SDK against the
real REST app.
"""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from coordinator.sdk import (
    Message,
    OpReceipt,
    RequestRejectedError,
    ServerError,
    TransportError,
)
from coordinator.sdk.rest_transport import RestTransport

from .http_server import free_port, serving

TOKEN = "s3cret-token"


@dataclass
class Script:
    """Responses to hand out in order (the last one repeats) and the requests received;
    with `hold`, each answer waits until the test sets it."""

    responses: list[Response] = field(default_factory=list)
    received: list[dict[str, Any]] = field(default_factory=list)
    hold: threading.Event | None = None


def stub_app(script: Script) -> FastAPI:
    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "POST"])
    async def anything(path: str, request: Request) -> Response:
        body = await request.body()
        script.received.append(
            {
                "method": request.method,
                "path": request.url.path,
                "raw_path": request.scope["raw_path"].decode(),
                "query": dict(request.query_params),
                "authorization": request.headers.get("authorization"),
                "json": await request.json() if body else None,
            }
        )
        if script.hold is not None:
            script.hold.wait(60)  # set by the test; the timeout only keeps a failure from hanging
        index = min(len(script.received), len(script.responses)) - 1
        return script.responses[index]

    return app


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def endpoint(script: Script) -> Iterator[str]:
    with serving(stub_app(script)) as url:
        yield url


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def transport(endpoint: str, sleeps: list[float]) -> Iterator[RestTransport]:
    rest = RestTransport(
        endpoint,
        "orders",
        token=TOKEN,
        timeout_seconds=5,
        attempts=3,
        sleep=sleeps.append,
        rand=lambda: 1.0,
    )
    yield rest
    rest.close()


def half_answer(**fields: Any) -> JSONResponse:
    answer = {
        "transaction_id": "tx-1",
        "msg_id": "0001000000000000002A",
        "status": "PREPARED",
        "stored_at": "2025-01-02T03:04:05.678Z",
        "partition": 1,
        "offset": 42,
    }
    return JSONResponse({**answer, **fields}, status_code=201)


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


def test_a_half_is_posted_to_the_contract_with_the_bearer_token(
    script: Script, transport: RestTransport
) -> None:
    script.responses = [half_answer()]
    msg = Message(
        topic="OrderPaid",
        body=b"\x00\xffpaid",
        keys=["o-1"],
        tags="paid",
        properties={"region": "eu"},
        queue_id=2,
        check_immunity_seconds=30,
    )
    receipt = transport.send_half(msg, "tx-1")
    (request,) = script.received
    assert (request["method"], request["path"]) == ("POST", "/v1/transactions")
    assert request["authorization"] == f"Bearer {TOKEN}"
    assert request["json"] == {
        "producer_group": "orders", "transaction_id": "tx-1", "topic": "OrderPaid",
        "body_base64": base64.b64encode(b"\x00\xffpaid").decode(), "keys": ["o-1"],
        "properties": {"region": "eu"}, "queue_id": 2, "tags": "paid",
        "check_immunity_seconds": 30,
    }  # fmt: skip
    assert receipt.msg_id == "0001000000000000002A"
    assert (receipt.partition, receipt.offset) == (1, 42)
    assert receipt.stored_at == datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)


def test_an_op_goes_to_its_path_with_the_id_percent_encoded(
    script: Script, transport: RestTransport
) -> None:
    answer = {
        "transaction_id": "a/b c?",
        "op": "ROLLBACK",
        "op_id": "op-0000-0000000000000007",
        "stored_at": "2025-01-02T03:04:05Z",
    }
    script.responses = [JSONResponse(answer, status_code=202)]
    receipt = transport.send_op("a/b c?", "ROLLBACK", from_check=True)
    (request,) = script.received
    assert request["raw_path"] == "/v1/transactions/a%2Fb%20c%3F/rollback"
    assert request["json"] == {"producer_group": "orders", "from_check": True}
    assert receipt.op_id == "op-0000-0000000000000007"


def test_ops_sent_together_are_one_batch_call_answered_item_by_item(
    script: Script, transport: RestTransport
) -> None:
    stored = {
        "transaction_id": "a",
        "op": "COMMIT",
        "op_id": "op-0000-0000000000000003",
        "stored_at": "2025-01-02T03:04:05Z",
    }
    script.responses = [
        JSONResponse(
            {
                "results": [
                    {
                        "status": 202,
                        "transaction_id": "a",
                        "op": "COMMIT",
                        "result": stored,
                        "error": None,
                    },
                    {
                        "status": 503,
                        "transaction_id": "b",
                        "op": "ROLLBACK",
                        "result": None,
                        "error": {"error": "unavailable", "message": "Kafka is unreachable"},
                    },
                    {
                        "status": 403,
                        "transaction_id": "c",
                        "op": "UNKNOWN",
                        "result": None,
                        "error": {"error": "forbidden", "message": "not your group"},
                    },
                ]
            },
            status_code=207,
        )
    ]
    a, b, c = transport.send_ops(
        [("a", "COMMIT", True), ("b", "ROLLBACK", True), ("c", "UNKNOWN", False)]
    )
    (request,) = script.received
    assert (request["method"], request["path"]) == ("POST", "/v1/ops/batch")
    assert request["json"] == {
        "ops": [
            {"transaction_id": "a", "op": "COMMIT", "producer_group": "orders", "from_check": True},
            {
                "transaction_id": "b",
                "op": "ROLLBACK",
                "producer_group": "orders",
                "from_check": True,
            },
            {
                "transaction_id": "c",
                "op": "UNKNOWN",
                "producer_group": "orders",
                "from_check": False,
            },
        ]
    }
    assert isinstance(a, OpReceipt)
    assert (a.transaction_id, a.op_id) == ("a", "op-0000-0000000000000003")
    assert isinstance(b, TransportError) and b.retriable
    assert isinstance(c, RequestRejectedError) and (c.status, c.code) == (403, "forbidden")


def test_a_batch_call_refused_as_a_whole_is_every_ops_error(
    script: Script, transport: RestTransport
) -> None:
    script.responses = [error(403, "forbidden", "token of another group")]
    results = transport.send_ops([("a", "COMMIT", True), ("b", "COMMIT", True)])
    assert len(script.received) == 1  # a 4xx is not retried
    assert [type(r) for r in results] == [RequestRejectedError, RequestRejectedError]


def test_a_batch_answer_that_is_not_the_contract_is_every_ops_server_error(
    script: Script, transport: RestTransport
) -> None:
    stored = {"transaction_id": "a", "op": "COMMIT", "op_id": "op-1"}  # no stored_at
    script.responses = [
        JSONResponse(
            {
                "results": [
                    {
                        "status": 202,
                        "transaction_id": "a",
                        "op": "COMMIT",
                        "result": stored,
                        "error": None,
                    },
                    {
                        "status": 202,
                        "transaction_id": "b",
                        "op": "COMMIT",
                        "result": stored,
                        "error": None,
                    },
                ]
            },
            status_code=202,
        )
    ]
    results = transport.send_ops(
        [("a", "COMMIT", True), ("b", "COMMIT", True), ("c", "COMMIT", True)]
    )
    assert [type(r) for r in results] == [ServerError, ServerError, ServerError]  # 2 of 3 answered
    results = transport.send_ops([("a", "COMMIT", True), ("b", "COMMIT", True)])
    assert [type(r) for r in results] == [ServerError, ServerError]  # no stored_at


@pytest.mark.parametrize("op", ["COMMIT", "UNKNOWN"])
def test_each_op_has_its_own_path(script: Script, transport: RestTransport, op: str) -> None:
    script.responses = [
        JSONResponse({"op_id": "op-1", "stored_at": "2025-01-02T03:04:05Z"}, status_code=202)
    ]
    transport.send_op("tx", op, from_check=False)
    assert script.received[0]["path"] == f"/v1/transactions/tx/{op.lower()}"


def test_a_4xx_becomes_request_rejected_with_the_contract_code_and_is_not_retried(
    script: Script, transport: RestTransport, sleeps: list[float]
) -> None:
    script.responses = [error(403, "forbidden", "this token acts for group payments")]
    with pytest.raises(RequestRejectedError) as caught:
        transport.send_half(Message(topic="T"), "tx-1")
    assert (caught.value.status, caught.value.code) == (403, "forbidden")
    assert caught.value.detail == "this token acts for group payments"
    assert not caught.value.retriable
    assert len(script.received) == 1
    assert sleeps == []


def test_a_4xx_that_is_not_the_contract_json_still_maps(
    script: Script, transport: RestTransport
) -> None:
    script.responses = [PlainTextResponse("Method Not Allowed", status_code=405)]
    with pytest.raises(RequestRejectedError) as caught:
        transport.send_op("tx", "COMMIT", from_check=False)
    assert (caught.value.status, caught.value.code) == (405, "http_405")
    assert "Method Not Allowed" in caught.value.detail


def test_503_is_retried_with_growing_backoff_until_it_succeeds(
    script: Script, transport: RestTransport, sleeps: list[float]
) -> None:
    unavailable = error(503, "kafka_unavailable", "the broker cannot be reached")
    script.responses = [unavailable, unavailable, half_answer()]
    receipt = transport.send_half(Message(topic="T"), "tx-1")
    assert receipt.msg_id == "0001000000000000002A"
    assert len(script.received) == 3
    assert sleeps == [0.2, 0.4]  # rand=1.0: the full exponential delay


def test_503_every_time_gives_a_retriable_transport_error(
    script: Script, transport: RestTransport, sleeps: list[float]
) -> None:
    script.responses = [error(503, "kafka_unavailable", "the broker cannot be reached")]
    with pytest.raises(TransportError, match="503 kafka_unavailable") as caught:
        transport.send_op("tx", "COMMIT", from_check=True)
    assert caught.value.retriable
    assert len(script.received) == 3
    assert len(sleeps) == 2


def test_429_is_retried_no_sooner_than_retry_after(
    script: Script, transport: RestTransport, sleeps: list[float]
) -> None:
    """The ingress answers 429 to a group over its share of long polls (contract 5.1)."""
    busy = error(429, "too_many_polls", "producer group 'orders' already has 8 long polls")
    busy.headers["Retry-After"] = "2"
    script.responses = [busy, JSONResponse({"check_requests": []})]
    assert transport.poll_checks(10, 1) == []
    assert len(script.received) == 2
    assert sleeps == [2.0]  # the backoff (0.2 s) is shorter than what the ingress asked


def test_a_500_is_a_server_error_and_is_not_retried(
    script: Script, transport: RestTransport, sleeps: list[float]
) -> None:
    script.responses = [PlainTextResponse("Internal Server Error", status_code=500)]
    with pytest.raises(ServerError) as caught:
        transport.send_half(Message(topic="T"), "tx-1")
    assert caught.value.status == 500
    assert len(script.received) == 1
    assert sleeps == []


def test_a_refused_connection_is_retried_then_reported(
    sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    rest = RestTransport(
        f"http://127.0.0.1:{free_port()}",
        "orders",
        token=TOKEN,
        attempts=3,
        sleep=sleeps.append,
        rand=lambda: 0.0,
    )
    try:
        with caplog.at_level(logging.WARNING), pytest.raises(TransportError) as caught:
            rest.send_half(Message(topic="T"), "tx-1")
    finally:
        rest.close()
    assert caught.value.retriable
    assert "cannot reach the REST ingress" in str(caught.value)
    assert sleeps == [0.1, 0.2]  # rand=0.0: half of each delay
    assert caplog.text.count("retrying in") == 2
    assert TOKEN not in caplog.text


def test_a_read_timeout_is_not_retried_here(
    script: Script, sleeps: list[float], endpoint: str
) -> None:
    # The request may have reached the ingress: the caller (the check loop) decides.
    # The answer comes only once the client has given up (not after a delay a paused test
    # process could outlast, finding the answer there when it resumes).
    script.hold = threading.Event()
    script.responses = [half_answer()]
    rest = RestTransport(endpoint, "orders", timeout_seconds=0.5, attempts=3, sleep=sleeps.append)
    try:
        with pytest.raises(TransportError, match="ReadTimeout"):
            rest.send_half(Message(topic="T"), "tx-1")
    finally:
        script.hold.set()
        rest.close()
    assert len(script.received) == 1
    assert sleeps == []


def test_the_long_poll_asks_within_the_contract_bounds_and_keeps_valid_requests(
    script: Script, transport: RestTransport, caplog: pytest.LogCaptureFixture
) -> None:
    ours = {
        "transaction_id": "tx-1",
        "msg_id": "M",
        "producer_group": "orders",
        "topic": "T",
        "queue_id": 0,
        "body_base64": base64.b64encode(b"b").decode(),
        "keys": [],
        "tags": None,
        "properties": {},
        "check_number": 4,
        "prepared_at_ms": 1,
        "requested_at_ms": 2,
    }
    script.responses = [
        JSONResponse(
            {
                "check_requests": [
                    ours,
                    {**ours, "producer_group": "payments"},
                    {"transaction_id": "broken"},
                ]
            }
        )
    ]
    requests = transport.poll_checks(max_records=900, wait_seconds=45.4)
    (request,) = script.received
    assert (request["method"], request["path"]) == ("GET", "/v1/check-requests")
    assert request["query"] == {"producer_group": "orders", "max": "500", "wait_seconds": "30"}
    assert [(r.transaction_id, r.check_number, r.body) for r in requests] == [("tx-1", 4, b"b")]
    assert "skipping malformed check request" in caplog.text
    assert "skipping check request of group payments" in caplog.text


def test_polling_for_nothing_sends_no_request(script: Script, transport: RestTransport) -> None:
    assert transport.poll_checks(0, 5) == []
    assert script.received == []


def test_open_mode_sends_no_authorization_header(script: Script, endpoint: str) -> None:
    script.responses = [JSONResponse({"check_requests": []})]
    rest = RestTransport(endpoint, "orders")
    try:
        assert rest.poll_checks(1, 0) == []
    finally:
        rest.close()
    assert script.received[0]["authorization"] is None


def test_a_fractional_wait_is_rounded_up_never_to_a_busy_poll(
    script: Script, transport: RestTransport
) -> None:
    script.responses = [JSONResponse({"check_requests": []})]
    transport.poll_checks(1, 0.2)
    assert script.received[0]["query"]["wait_seconds"] == "1"
