"""A real secured KRaft broker (SASL SCRAM + StandardAuthorizer + our ACLs) for these tests.

One broker per test module: the auth file names two groups ("orders", "payments"), an
operator and the engine; the topics are laid out per group (coordinator/core/topics.py), as
`txcoord up
--auth-file` lays them out; `SecuredKafka.config_as` gives a configuration that connects as
one of them. `make_auth_file` is shared with the TLS test, which runs its own broker.
"""

from __future__ import annotations

import secrets
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from coordinator.core.config import Config, load_config
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import TopicLayout
from coordinator.kafka_clients.options import COMMITTED_ONLY
from coordinator.runtime.local_stack.broker_auth import BrokerAuth, apply_auth, load_broker_auth
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from streams.kafka_io.ingress_topics import ensure_ingress_topics

GROUPS = ("orders", "payments")


def make_auth_file(root: Path, tls: bool = False, rest_tokens: str = "") -> Path:
    """Write an auth file with engine, operator and GROUPS' principals (and TLS files).

    `rest_tokens` is TOML of `[[token]]` entries for the REST ingress, put first.
    """
    root.mkdir(parents=True, exist_ok=True)
    secret_dir = root / "secrets"
    secret_dir.mkdir()
    lines = [rest_tokens]
    for role in ("engine", "operator"):
        (secret_dir / f"{role}.password").write_text(secrets.token_urlsafe(24) + "\n")
        (secret_dir / f"{role}.password").chmod(0o600)
        lines += [
            f"[kafka.{role}]",
            f'principal = "txcoord-{role}"',
            f'password_file = "secrets/{role}.password"',
            "",
        ]
    for group in GROUPS:
        (secret_dir / f"{group}.password").write_text(secrets.token_urlsafe(24))
        (secret_dir / f"{group}.password").chmod(0o600)
        lines += [
            "[[kafka.group]]",
            f'group = "{group}"',
            f'principal = "{group}-app"',
            f'password_file = "secrets/{group}.password"',
            "",
        ]
    if tls:
        make_certificates(root / "tls")
        lines += [
            "[kafka.tls]",
            'certfile = "tls/broker.pem"',
            'keyfile = "tls/broker.key"',
            'cafile = "tls/ca.pem"',
        ]
    path = root / "auth.toml"
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o600)
    return path


def make_certificates(folder: Path) -> None:
    """Make a CA and a broker certificate for 127.0.0.1/localhost with the openssl CLI."""
    folder.mkdir()

    def run(*arguments: str) -> None:
        subprocess.run(["openssl", *arguments], cwd=folder, check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=txcoord test CA",
    )
    # genpkey writes PKCS#8, the only unencrypted PEM key format Kafka's PEM keystore reads.
    run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "broker.key")
    run("req", "-new", "-key", "broker.key", "-out", "broker.csr", "-subj", "/CN=127.0.0.1")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        "x509",
        "-req",
        "-in",
        "broker.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "broker.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )


@dataclass(frozen=True)
class SecuredKafka:
    """A started secured broker, its auth file's principals and the ingress topics."""

    broker: KafkaBroker
    auth: BrokerAuth
    config: Config  # the engine's
    acls: list[Any]

    @property
    def bootstrap_servers(self) -> str:
        return self.broker.bootstrap_servers

    def security_of(self, group: str | None = None, role: str = "engine") -> KafkaSecurity:
        """Return how group `group`'s principal (or the engine or operator) connects."""
        who = self.auth.groups[group] if group else getattr(self.auth, role)
        return who.security(self.auth.tls)

    @property
    def layout(self) -> TopicLayout:
        return self.config.kafka.layout

    def config_as(self, security: KafkaSecurity) -> Config:
        """Return the configuration with `security` as its Kafka client settings."""
        fields = {name: getattr(security, name) for name in KafkaSecurity.__dataclass_fields__}
        return replace(self.config, kafka=replace(self.config.kafka, **fields))


def start_secured(root: Path, tls: bool = False) -> SecuredKafka:
    """Start a secured broker under `root`, create the ingress topics and the ACLs."""
    auth = load_broker_auth(make_auth_file(root / "auth", tls=tls))
    assert auth is not None
    broker = KafkaBroker(BrokerSettings(data_dir=root / "kafka", auth=auth)).start()
    try:
        suffix = uuid.uuid4().hex[:8]
        config = load_config(
            overrides={
                "warehouse": str(root / "warehouse"),
                "kafka.bootstrap_servers": broker.bootstrap_servers,
                "kafka.half_topic": f"half-{suffix}",
                "kafka.op_topic": f"op-{suffix}",
                "kafka.check_topic": f"check-{suffix}",
                "kafka.operator_topic": f"operator-{suffix}",
                "kafka.partitions": "2",
                "kafka.topics_per_group": "true",
            }
        )
        secured = SecuredKafka(broker, auth, config, [])
        config = secured.config_as(auth.engine_security)
        ensure_ingress_topics(config)
        created = apply_auth(broker.bootstrap_servers, auth, config)
    except BaseException:
        broker.stop()
        raise
    return SecuredKafka(broker, auth, config, created)


@pytest.fixture(scope="module")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredKafka]:
    """Return a secured SASL_PLAINTEXT broker of this test module, stopped after it."""
    secured = start_secured(tmp_path_factory.mktemp("secured"))
    try:
        yield secured
    finally:
        secured.broker.stop()


def read_all(bootstrap: str, topic: str, count: int, security: KafkaSecurity) -> list[Any]:
    """Return `topic`'s committed records once at least `count` are there (30 s at most)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        **COMMITTED_ONLY,  # the engine's check records come in transactions
        **security.client_options(),
    )
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = time.monotonic() + 30
        while len(records) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def publish(bootstrap: str, topic: str, records: list[Any], security: KafkaSecurity) -> None:
    """Write (key, value, headers) records as `security`'s principal and wait for acks."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security.client_options())
    try:
        for key, value, headers in records:
            producer.send(topic, key=key, value=value, headers=headers)
        producer.flush(30)
    finally:
        producer.close()
