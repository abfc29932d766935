"""Fixtures of the REST tests: topics and folders of the test's own, the app, tokens."""

from __future__ import annotations

import hashlib
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coordinator.core.config import Config, load_config
from coordinator.kafka_clients.admin import delete_topic
from coordinator.rest.app import create_app
from streams.kafka_io.ingress_topics import ensure_ingress_topics

#: Where test clients address the app: a loopback name, as the open mode requires
#: (coordinator/rest/host_guard.py; TestClient's own default, `testserver`, is refused).
LOCAL = "http://127.0.0.1"
#: Plaintext tokens of the auth file written by `auth_file`.
ORDERS_TOKEN = "orders-secret-token"
BILLING_TOKEN = "billing-secret-token"
ADMIN_TOKEN = "admin-secret-token"
#: Consumes only: consumer group `ledger` on Billing and OrderPaid, `audit` on every topic.
LEDGER_TOKEN = "ledger-secret-token"


def make_rest_config(bootstrap_servers: str, folder: Path, **overrides: str) -> Config:
    """Return a configuration with uuid-named ingress topics (created) and its own warehouse."""
    suffix = uuid.uuid4().hex[:8]
    config = load_config(
        overrides={
            "warehouse": str(folder / "warehouse"),
            "kafka.bootstrap_servers": bootstrap_servers,
            "kafka.half_topic": f"half-{suffix}",
            "kafka.op_topic": f"op-{suffix}",
            "kafka.check_topic": f"check-{suffix}",
            "kafka.operator_topic": f"operator-{suffix}",
            "kafka.partitions": "2",
            **overrides,
        }
    )
    ensure_ingress_topics(config)
    return config


def drop_topics(config: Config) -> None:
    """Delete the ingress topics of `config`."""
    for topic in (config.kafka.half_topic, config.kafka.op_topic, config.kafka.check_topic):
        delete_topic(config.kafka.bootstrap_servers, topic)


@pytest.fixture
def rest_config(bootstrap_servers: str, tmp_path: Path) -> Iterator[Config]:
    """Return a configuration whose topics and warehouse belong to this test."""
    config = make_rest_config(bootstrap_servers, tmp_path)
    try:
        yield config
    finally:
        drop_topics(config)


@pytest.fixture
def client(rest_config: Config) -> Iterator[TestClient]:
    """Return a client of the real app (open mode) on this test's topics."""
    with TestClient(
        create_app(rest_config), base_url=LOCAL, raise_server_exceptions=False
    ) as test_client:
        yield test_client


def write_auth_file(path: Path) -> Path:
    """Write an auth file (owner-only, as required): orders (sha256, produces only), billing
    (plaintext, discouraged; produces, and consumes as `billing-readers` on Billing), ledger
    (consumes only) and an admin."""
    path.touch(mode=0o600)
    path.chmod(0o600)
    digest = hashlib.sha256(ORDERS_TOKEN.encode()).hexdigest()
    ledger = hashlib.sha256(LEDGER_TOKEN.encode()).hexdigest()
    admin = hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()
    path.write_text(
        f'[[token]]\ngroup = "orders"\nsha256 = "{digest}"\n\n'
        f'[[token]]\ngroup = "billing"\ntoken = "{BILLING_TOKEN}"\n'
        '[[token.consume]]\ngroup = "billing-readers"\ntopics = ["Billing"]\n\n'
        f'[[token]]\nname = "ledger"\nsha256 = "{ledger}"\n'
        'consume = [\n  { group = "ledger", topics = ["Billing", "OrderPaid"] },\n'
        '  { group = "audit", topics = ["*"] },\n]\n\n'
        f'[[token]]\nadmin = true\nname = "oncall"\nsha256 = "{admin.upper()}"\n'
    )
    return path


@pytest.fixture
def auth_config(rest_config: Config, tmp_path: Path) -> Config:
    """Return `rest_config` with the auth file of `write_auth_file`."""
    auth_file = write_auth_file(tmp_path / "tokens.toml")
    return load_config(
        overrides={
            "warehouse": rest_config.warehouse,
            "kafka.bootstrap_servers": rest_config.kafka.bootstrap_servers,
            "kafka.half_topic": rest_config.kafka.half_topic,
            "kafka.op_topic": rest_config.kafka.op_topic,
            "kafka.check_topic": rest_config.kafka.check_topic,
            "kafka.partitions": "2",
            "rest.auth_file": str(auth_file),
        }
    )


@pytest.fixture
def auth_client(auth_config: Config) -> Iterator[TestClient]:
    """Return a client of the real app with the tokens of `write_auth_file`."""
    with TestClient(
        create_app(auth_config), base_url=LOCAL, raise_server_exceptions=False
    ) as test_client:
        yield test_client


def bearer(token: str) -> dict[str, str]:
    """Return the Authorization header of `token`."""
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that nothing listens on (at the time of asking)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
