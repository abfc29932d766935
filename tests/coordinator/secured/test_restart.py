"""A secured broker restarts in place: credentials kept, new principals of the auth file added."""

from __future__ import annotations

import secrets
from dataclasses import replace
from pathlib import Path

import pytest

from coordinator.runtime.local_stack.broker_auth import apply_auth, load_broker_auth
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker

from .conftest import publish, read_all, start_secured

pytestmark = pytest.mark.kafka


def test_a_restart_keeps_the_credentials_and_adds_new_group_principals(tmp_path: Path) -> None:
    first = start_secured(tmp_path)
    kafka = first.config.kafka
    first.broker.stop()
    # A group added to the auth file between the runs (its storage is not formatted again).
    auth_file = tmp_path / "auth" / "auth.toml"
    (tmp_path / "auth" / "secrets" / "refunds.password").write_text(secrets.token_urlsafe(24))
    (tmp_path / "auth" / "secrets" / "refunds.password").chmod(0o600)
    with auth_file.open("a") as out:
        out.write(
            '[[kafka.group]]\ngroup = "refunds"\nprincipal = "refunds-app"\n'
            'password_file = "secrets/refunds.password"\n'
        )
    auth = load_broker_auth(auth_file)
    assert auth is not None
    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path / "kafka", auth=auth)).start()
    try:
        config = replace(
            first.config, kafka=replace(kafka, bootstrap_servers=broker.bootstrap_servers)
        )
        apply_auth(broker.bootstrap_servers, auth, config)
        for group in ("orders", "refunds"):
            topic = kafka.layout.half_topic(group)
            publish(
                broker.bootstrap_servers,
                topic,
                [(group.encode(), b"x", [])],
                auth.groups[group].security(),
            )
            (record,) = read_all(broker.bootstrap_servers, topic, 1, auth.engine_security)
            assert record.key == group.encode()
    finally:
        broker.stop()
