"""The RocketMQ gRPC endpoint as its own process (`python -m coordinator.rocketmq`), and the
official client's pieces the tests use: its producer, and its generated stub, signed as the
client signs."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
from rocketmq.grpc_protocol import MessagingServiceStub
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.util import Signature

from tests.app_process import AppProcess
from tests.coordinator.secured.conftest import make_certificates

ROOT = Path(__file__).resolve().parents[3]


def start_endpoint(settings: dict[str, str], port: int = 0) -> tuple[AppProcess, str]:
    """Start the endpoint with `settings` on `port` (0: any free one); return the process
    and its `host:port` once it listens."""
    command = [
        sys.executable, "-m", "coordinator.rocketmq",
        *[arg for key, value in {**settings, "grpc.port": str(port)}.items()
          for arg in ("--set", f"{key}={value}")],
    ]  # fmt: skip
    process = AppProcess({}, command=command)
    if not process.wait_for_line("RocketMQ gRPC endpoint on", 60):
        process.kill9()
        raise AssertionError(f"the endpoint did not start:\n{process.tail()}")
    (line,) = [line for line in process.lines() if "RocketMQ gRPC endpoint on" in line][-1:]
    match = re.search(r"on (\S+:\d+)", line)
    assert match, line
    return process, match.group(1)


def stop_endpoint(process: AppProcess) -> None:
    """Stop the endpoint (SIGTERM, then SIGKILL after 20 s)."""
    if process.process.poll() is None:
        os.killpg(process.process.pid, signal.SIGTERM)
        try:
            process.process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill9()


@contextlib.contextmanager
def endpoint_process(settings: dict[str, str]) -> Iterator[str]:
    """Run the endpoint with `settings` (and any free port); yield its `host:port`."""
    process, address = start_endpoint(settings)
    try:
        yield address
        assert process.process.poll() is None, f"the endpoint died:\n{process.tail()}"
    finally:
        stop_endpoint(process)


def client_configuration(address: str, access_key: str, secret_key: str) -> ClientConfiguration:
    """Return the official client's configuration of `address` with these credentials."""
    return ClientConfiguration(address, Credentials(access_key, secret_key), request_timeout=10)


class RawClient:
    """The official client's generated stub, each call signed as the client signs it."""

    def __init__(self, address: str, access_key: str, secret_key: str) -> None:
        self.configuration = client_configuration(address, access_key, secret_key)
        self.channel = grpc.insecure_channel(address)
        self.stub = MessagingServiceStub(self.channel)

    def metadata(self, client_id: str = "test-host@1@0@raw") -> Any:
        return Signature.metadata(self.configuration, client_id)

    def call(self, name: str, request: Any) -> Any:
        """Call unary `name` with `request`; return the response."""
        return getattr(self.stub, name)(request, metadata=self.metadata(), timeout=30)

    def close(self) -> None:
        self.channel.close()


def tls_settings(folder: Path) -> dict[str, str]:
    """Return grpc.tls_* settings of a certificate for 127.0.0.1/localhost; its CA is
    `folder / "ca.pem"`."""
    make_certificates(folder)
    (folder / "broker.key").chmod(0o600)
    return {
        "grpc.tls_certfile": str(folder / "broker.pem"),
        "grpc.tls_keyfile": str(folder / "broker.key"),
    }
