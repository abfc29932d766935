"""The REST ingress's edges: the Host of an open-mode request, bodies no route takes, and
metric labels a caller cannot grow.

Each case drives the app as the server does (ASGI calls, or a real server on loopback for
what only a socket shows); nothing here needs Kafka: every refusal comes before a write.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from coordinator.core.config import load_config
from coordinator.rest.app import create_app
from coordinator.rest.host_guard import allowed_host, host_name
from tests.coordinator.rest.conftest import LOCAL, write_auth_file
from tests.coordinator.sdk.http_server import first_answer

MiB = 1024 * 1024


def open_app(tmp_path: Path, host: str = "127.0.0.1") -> FastAPI:
    return create_app(load_config(overrides={"warehouse": str(tmp_path), "rest.host": host}))


def token_app(tmp_path: Path) -> FastAPI:
    auth_file = write_auth_file(tmp_path / "tokens.toml")
    return create_app(
        load_config(overrides={"warehouse": str(tmp_path), "rest.auth_file": str(auth_file)})
    )


def call(
    app: FastAPI, method: str, path: str, headers: dict[str, str], body_size: int = 0
) -> tuple[int, int]:
    """Call `app` as a server would; return the status and the body bytes it read."""
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    if body_size:
        raw += [
            (b"content-type", b"application/json"),
            (b"content-length", str(body_size).encode()),
        ]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": b"", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 5000),
        "headers": raw,
    }  # fmt: skip
    read: list[int] = []
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if sum(read) >= body_size:
            return {"type": "http.disconnect"}
        read.append(MiB)
        return {"type": "http.request", "body": b" " * MiB, "more_body": sum(read) < body_size}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    assert sent and sent[0]["type"] == "http.response.start", sent
    return sent[0]["status"], sum(read)


# -- DNS rebinding: the open mode serves this machine's names only ---------------------------


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "localhost.evil.example",
     "[::2]:8080", "10.0.0.1:8080", "attacker", ""],
)  # fmt: skip
def test_open_mode_refuses_a_request_to_another_host(tmp_path: Path, host: str) -> None:
    """A rebound page's commit is refused before it reaches a route (421), whatever it is."""
    app = open_app(tmp_path)
    status, read = call(app, "POST", "/v1/transactions/x/commit", {"host": host}, body_size=30)
    assert (status, read) == (421, 0)
    status, _ = call(app, "GET", "/v1/transactions/x", {"host": host})
    assert status == 421


def test_the_refusal_says_why(tmp_path: Path) -> None:
    with TestClient(open_app(tmp_path), base_url="http://evil.example:8080") as client:
        answer = client.get("/healthz")
    assert answer.status_code == 421
    assert answer.json()["error"] == "misdirected_request"
    assert "open mode" in answer.json()["message"]


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8080", "LOCALHOST:8080", "localhost.:8080", "127.0.0.1:8080",
     "127.0.0.2", "[::1]:8080", "[::1]"],
)  # fmt: skip
def test_open_mode_serves_this_machines_names(tmp_path: Path, host: str) -> None:
    assert call(open_app(tmp_path), "GET", "/healthz", {"host": host})[0] == 200


def test_open_mode_serves_the_listen_address_by_name(tmp_path: Path) -> None:
    assert allowed_host("localhost:8080", "127.0.0.1")
    assert (
        call(open_app(tmp_path, host="localhost"), "GET", "/healthz", {"host": "localhost"})[0]
        == 200
    )


@pytest.mark.parametrize(
    "headers",
    [{"sec-fetch-site": "cross-site"}, {"origin": "https://evil.example"},
     {"origin": "null"}, {"origin": "http://127.0.0.1.evil.example:8080"}],
)  # fmt: skip
def test_open_mode_refuses_a_page_of_another_site(tmp_path: Path, headers: dict[str, str]) -> None:
    """A cross-site GET needs no preflight: it drained check requests (security finding 12)."""
    app = open_app(tmp_path)
    where = {"host": "localhost:8080", **headers}
    assert call(app, "GET", "/v1/check-requests?producer_group=g&wait_seconds=0", where)[0] == 403
    assert call(app, "POST", "/v1/transactions/x/commit", where, body_size=30) == (403, 0)


@pytest.mark.parametrize(
    "headers",
    [{"sec-fetch-site": "same-origin"}, {"origin": "http://localhost:5173"},
     {"origin": "http://127.0.0.1:8080", "sec-fetch-site": "same-site"}],
)  # fmt: skip
def test_open_mode_serves_pages_of_this_machine(tmp_path: Path, headers: dict[str, str]) -> None:
    assert call(open_app(tmp_path), "GET", "/healthz", {"host": "localhost", **headers})[0] == 200


def test_a_request_without_host_comes_from_no_browser(tmp_path: Path) -> None:
    assert call(open_app(tmp_path), "GET", "/healthz", {})[0] == 200


def test_with_tokens_any_host_is_served(tmp_path: Path) -> None:
    """A page has no token to send; a proxy in front may name the ingress as it likes."""
    assert call(token_app(tmp_path), "GET", "/healthz", {"host": "ingress.example"})[0] == 200


def test_host_names_lose_their_port() -> None:
    assert host_name("[::1]:8080") == "::1"
    assert host_name("Example.COM.:80") == "example.com"
    assert host_name("[::1") == "[::1"


def test_a_real_server_refuses_a_rebound_host(tmp_path: Path) -> None:
    head = first_answer(
        open_app(tmp_path),
        b"POST /v1/transactions/t-1/rollback HTTP/1.1\r\nHost: rebound.example\r\n"
        b"Content-Type: application/json\r\nContent-Length: 27\r\n\r\n"
        b'{"producer_group":"orders"}',
    )
    assert head.startswith(b"HTTP/1.1 421"), head[:200]


# -- a body on a route that takes none is never read -----------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/healthz", 405), ("POST", "/metrics", 405), ("POST", "/no/such/path", 404),
     ("PUT", "/v2/anything", 404), ("PATCH", "/openapi.json", 405)],
)  # fmt: skip
def test_a_body_no_route_takes_is_refused_unread(
    tmp_path: Path, method: str, path: str, status: int
) -> None:
    """Before: 16 MiB buffered, then the 404/405. Now the answer comes with none read."""
    for app in (open_app(tmp_path), token_app(tmp_path)):
        assert call(app, method, path, {"host": "localhost"}, body_size=16 * MiB) == (status, 0)


def test_a_real_server_answers_405_while_the_body_is_still_unsent(tmp_path: Path) -> None:
    """Announce 16 MiB, send none of it: a server that reads first would wait for ever."""
    head = first_answer(
        open_app(tmp_path),
        b"POST /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {16 * MiB}\r\n\r\n".encode()
        + b'{"a": [',
    )
    assert head.startswith(b"HTTP/1.1 405"), head[:200]


def test_a_route_that_takes_a_body_still_reads_it(tmp_path: Path) -> None:
    """The refusal is only for routes without a body: a send's body is read (and, here,
    refused for its content, before any write)."""
    status, read = call(
        open_app(tmp_path), "POST", "/v1/transactions", {"host": "localhost"}, body_size=2 * MiB
    )
    assert status == 400 and read == 2 * MiB


# -- metric labels are bounded ---------------------------------------------------------------


def test_a_made_up_method_is_counted_as_other(tmp_path: Path) -> None:
    """Before: `curl -X Z1`, `-X Z2`, ...: one new series each."""
    with TestClient(open_app(tmp_path), base_url=LOCAL) as client:
        for method in ("Z1", "Z2", "BREW", "get"):
            client.request(method, "/healthz")
        client.get("/healthz")
        text = client.get("/metrics").text
    series = [line for line in text.splitlines() if line.startswith("txcoord_rest_requests_total")]
    assert not any(f'method="{m}"' in line for line in series for m in ("Z1", "Z2", "BREW", "get"))
    assert any('method="other"' in line and 'status="405"' in line for line in series), series
    assert any('method="GET"' in line and 'status="200"' in line for line in series), series
