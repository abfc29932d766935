"""Serve an ASGI app with uvicorn on a free loopback port, in a thread, for one test."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn


@contextlib.contextmanager
def serving(app: Any) -> Iterator[str]:
    """Yield the base URL of `app` served on 127.0.0.1; stop the server afterwards."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=1)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def first_answer(app: Any, request: bytes, wait_seconds: float = 60) -> bytes:
    """Serve `app`, send it the raw `request` and return the first bytes it answers.

    The request may announce a body it never sends: a server that reads the body before it
    answers waits for ever, so no answer within `wait_seconds` fails the test.
    """
    with serving(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=wait_seconds) as conn:
            conn.sendall(request)
            try:
                return conn.recv(4096)
            except TimeoutError:
                raise AssertionError(
                    f"no answer in {wait_seconds:.0f} s: the server waits for the body"
                ) from None


def free_port() -> int:
    """Return a loopback port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
