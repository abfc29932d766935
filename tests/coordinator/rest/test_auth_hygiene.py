"""contract 5.1 auth hygiene: auth before the body, open mode on loopback only, safe token files."""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.core.config import Config, load_config
from coordinator.core.errors import ConfigurationError
from coordinator.rest.app import build_server, create_app
from coordinator.rest.auth import MIN_TOKEN_LENGTH, load_token_file, sha256_hex
from coordinator.runtime.local_stack.ports import free_port
from coordinator.sdk.rest_transport import RestTransport
from tests.coordinator.rest.conftest import ORDERS_TOKEN, write_auth_file
from tests.coordinator.sdk.http_server import first_answer
from tests.coordinator.secured.conftest import make_certificates

# -- authentication before the body -----------------------------------------------------


def _scope(path: str, token: str, length: int) -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": b"", "server": ("127.0.0.1", 8080), "client": ("127.0.0.1", 5000),
        "headers": [(b"authorization", f"Bearer {token}".encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(length).encode())],
    }  # fmt: skip


@pytest.mark.parametrize(
    "path",
    ["/v1/transactions", "/v1/transactions/batch", "/v1/ops/batch", "/v1/transactions/t/commit"],
)
def test_a_bad_token_is_401_before_one_byte_of_the_body_is_read(
    auth_config: Config, path: str
) -> None:
    """The app never calls receive(): the 16 MiB the client announces stay on the wire."""
    app = create_app(auth_config)
    size = auth_config.rest.max_request_size
    received: list[int] = []
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        received.append(1024 * 1024)
        return {"type": "http.request", "body": b" " * (1024 * 1024), "more_body": True}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(_scope(path, "not-a-token-of-the-file", size), receive, send))
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 401
    assert received == [], f"{sum(received)} bytes of the body were read before the 401"


def test_a_real_server_answers_401_while_the_body_is_still_unsent(auth_config: Config) -> None:
    """Announce 16 MiB, send none of it: a server that reads first would wait for ever."""
    head = first_answer(
        create_app(auth_config),
        b"POST /v1/transactions/batch HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer wrong-token-wrong-token\r\n"
        b"Content-Type: application/json\r\n"
        + f"Content-Length: {auth_config.rest.max_request_size}\r\n\r\n".encode()
        + b'{"messages": [',
    )
    assert head.startswith(b"HTTP/1.1 401"), head[:200]
    assert b'"unauthorized"' in head or b"www-authenticate" in head.lower()


# -- open mode listens on loopback only -------------------------------------------------


def _open(rest_config: Config, host: str) -> Config:
    return load_config(
        overrides={
            "warehouse": rest_config.warehouse,
            "kafka.bootstrap_servers": rest_config.kafka.bootstrap_servers,
            "rest.host": host,
        }
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "example.com", "192.168.0.1"])
def test_open_mode_refuses_a_host_that_is_not_loopback(tmp_path: Path, host: str) -> None:
    config = load_config(overrides={"warehouse": str(tmp_path), "rest.host": host})
    with pytest.raises(ConfigurationError, match=r"open mode.*loopback.*rest\.auth_file"):
        create_app(config)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_open_mode_starts_on_loopback_and_says_so(
    tmp_path: Path, host: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    create_app(load_config(overrides={"warehouse": str(tmp_path), "rest.host": host}))
    assert "open mode" in caplog.text
    assert "0.0.0.0" not in caplog.text
    assert "loopback" in caplog.text


def test_with_tokens_and_tls_any_host_is_allowed(tmp_path: Path) -> None:
    auth_file = write_auth_file(tmp_path / "tokens.toml")
    for tls in ({"rest.behind_tls_proxy": "true"}, certificate_settings(tmp_path / "tls")):
        create_app(
            load_config(
                overrides={
                    "warehouse": str(tmp_path),
                    "rest.host": "0.0.0.0",
                    "rest.auth_file": str(auth_file),
                    **tls,
                }
            )
        )


# -- TLS beyond loopback ----------------------------------------------------------------


def certificate_settings(folder: Path) -> dict[str, str]:
    """Return rest.tls_* settings of a certificate for 127.0.0.1/localhost, its CA beside."""
    make_certificates(folder)
    (folder / "broker.key").chmod(0o600)
    return {
        "rest.tls_certfile": str(folder / "broker.pem"),
        "rest.tls_keyfile": str(folder / "broker.key"),
    }


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "ingress.example"])
def test_plain_http_beyond_loopback_is_refused(tmp_path: Path, host: str) -> None:
    """Before: the ingress took bearer tokens over plain HTTP on any address."""
    auth_file = write_auth_file(tmp_path / "tokens.toml")
    config = load_config(
        overrides={"warehouse": str(tmp_path), "rest.host": host, "rest.auth_file": str(auth_file)}
    )
    with pytest.raises(ConfigurationError, match=r"plain HTTP.*tls_certfile.*behind_tls_proxy"):
        create_app(config)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"rest.tls_certfile": "CERT"}, "go together"),
        ({"rest.tls_certfile": "CERT", "rest.tls_keyfile": "/no/key.pem"}, "not a readable file"),
        ({"rest.tls_certfile": "CERT", "rest.tls_keyfile": "KEY", "rest.behind_tls_proxy": "1"},
         "set one of them"),
    ],
)  # fmt: skip
def test_tls_settings_that_cannot_work_are_refused(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    files = certificate_settings(tmp_path / "tls")
    known = {"CERT": files["rest.tls_certfile"], "KEY": files["rest.tls_keyfile"]}
    with pytest.raises(ConfigurationError, match=message):
        load_config(overrides={k: known.get(v, v) for k, v in settings.items()})


def test_a_key_others_may_read_is_refused(tmp_path: Path) -> None:
    files = certificate_settings(tmp_path / "tls")
    Path(files["rest.tls_keyfile"]).chmod(0o644)
    with pytest.raises(ConfigurationError, match=r"rest\.tls_keyfile .*chmod 600"):
        load_config(overrides=files)


def test_the_ingress_serves_tls(tmp_path: Path) -> None:
    """A real server with the configured certificate: HTTPS answers, plain HTTP does not."""
    auth_file = write_auth_file(tmp_path / "tokens.toml")
    port = free_port()
    config = load_config(
        overrides={
            "warehouse": str(tmp_path),
            "rest.port": str(port),
            "rest.auth_file": str(auth_file),
            **certificate_settings(tmp_path / "tls"),
        }
    )
    server = build_server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        ca = ssl.create_default_context(cafile=tmp_path / "tls" / "ca.pem")
        answer = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=ca, timeout=10)
        assert answer.status_code == 200
        refused = httpx.post(
            f"https://localhost:{port}/v1/transactions",
            verify=ca,
            timeout=10,
            headers={"Authorization": f"Bearer {ORDERS_TOKEN}"},
            json={"producer_group": "billing", "topic": "T"},
        )
        assert refused.status_code == 403  # authenticated over TLS, then authorised
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        # The SDK's REST transport, with the private CA, and without it.
        endpoint = f"https://localhost:{port}"
        ca_file = str(tmp_path / "tls" / "ca.pem")
        trusting = RestTransport(endpoint, "orders", token=ORDERS_TOKEN, cafile=ca_file)
        assert trusting._client.get("/healthz").status_code == 200
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            RestTransport(endpoint, "orders", token=ORDERS_TOKEN)._client.get("/healthz")
    finally:
        server.should_exit = True
        thread.join(10)


# -- the token file ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660, 0o606])
def test_a_token_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = write_auth_file(tmp_path / "tokens.toml")
    path.chmod(mode)
    with pytest.raises(ConfigurationError, match=r"by group or others.*chmod 600"):
        load_token_file(path)


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_token_file_of_its_owner_only_is_accepted(tmp_path: Path, mode: int) -> None:
    path = write_auth_file(tmp_path / "tokens.toml")
    path.chmod(mode)
    assert len(load_token_file(path)) == 4  # every token of write_auth_file


def test_a_short_plaintext_token_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    short = "x" * (MIN_TOKEN_LENGTH - 1)
    path.write_text(f'[[token]]\ngroup = "g"\ntoken = "{short}"\n')
    path.chmod(0o600)
    with pytest.raises(ConfigurationError, match=f"at least {MIN_TOKEN_LENGTH} characters"):
        load_token_file(path)
    path.write_text(f'[[token]]\ngroup = "g"\ntoken = "{short}y"\n')
    assert len(load_token_file(path)) == 1


def test_a_digest_cannot_be_measured_but_the_fixture_tokens_are_long_enough(
    tmp_path: Path,
) -> None:
    """Only sha256 digests are stored: the length rule applies where a token is written down."""
    assert len(ORDERS_TOKEN) >= MIN_TOKEN_LENGTH
    path = tmp_path / "tokens.toml"
    path.write_text(f'[[token]]\ngroup = "g"\nsha256 = "{sha256_hex("short")}"\n')
    path.chmod(0o600)
    assert len(load_token_file(path)) == 1
