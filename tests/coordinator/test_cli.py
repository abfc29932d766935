"""The command line's logging: client libraries stay quiet unless asked (-v)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import pytest

from coordinator.cli import NOISY_LOGGERS, configure_logging


@pytest.fixture(autouse=True)
def restore_levels() -> Iterator[None]:
    saved = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


def requests_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Send one real request through httpx (a local transport) and return what it logged."""
    caplog.clear()
    with httpx.Client(transport=httpx.MockTransport(lambda _: httpx.Response(200))) as client:
        client.get("http://demo.invalid/v1/transactions")
    return [r.getMessage() for r in caplog.records if r.name.startswith("httpx")]


def test_httpx_prints_no_line_per_request_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # the handler takes everything; the loggers decide
    configure_logging(0)
    assert requests_logged(caplog) == []
    configure_logging(1)
    assert any("HTTP Request: GET" in line for line in requests_logged(caplog))
