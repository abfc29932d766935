"""`txcoord provision`: a group's own topics on the real broker, and the ACLs to grant."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner
from kafka.admin import ConfigResource, ConfigResourceType

from coordinator.cli import main
from coordinator.core.config import load_config
from coordinator.core.topics import (
    CHECKS_TRANSACTIONAL_PREFIX,
    NOTICES_TRANSACTIONAL_PREFIX,
    transactional_id,
)
from coordinator.kafka_clients.admin import admin_client, delete_topic

pytestmark = pytest.mark.kafka


@pytest.fixture
def prefix(bootstrap_servers: str) -> Iterator[str]:
    """Return topic names of this test's own; its topics are deleted after it."""
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    with admin_client(bootstrap_servers) as admin:
        mine = [t for t in admin.list_topics() if t.startswith(name + "-")]
    for topic in mine:
        delete_topic(bootstrap_servers, topic)


def run(bootstrap_servers: str, prefix: str, *args: str) -> Any:
    settings = {
        "kafka.bootstrap_servers": bootstrap_servers, "kafka.topics_per_group": "true",
        "kafka.half_topic": f"{prefix}-half", "kafka.op_topic": f"{prefix}-op",
        "kafka.check_topic": f"{prefix}-check", "kafka.operator_topic": f"{prefix}-operator",
        "kafka.partitions": "2",
    }  # fmt: skip
    options = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    return CliRunner().invoke(main, ["provision", *options, *args])


def test_provision_creates_the_topics_and_prints_the_acls(
    bootstrap_servers: str, prefix: str
) -> None:
    result = run(
        bootstrap_servers,
        prefix,
        "--group",
        "orders=orders-app",
        "--group",
        "billing",
        "--operator",
        "ops-admin",
    )
    # The test broker has no authorizer: provision does its work, then says the shared
    # topics are anyone's (coordinator/admin/shared_topics.py) and exits 2.
    assert result.exit_code == 2, result.output
    assert "the cluster has no authorizer" in result.stderr, result.output
    layout = load_config(
        overrides={
            "kafka.half_topic": f"{prefix}-half",
            "kafka.op_topic": f"{prefix}-op",
            "kafka.check_topic": f"{prefix}-check",
            "kafka.operator_topic": f"{prefix}-operator",
            "kafka.topics_per_group": "true",
        }
    ).kafka.layout
    created = [
        layout.half_topic("orders"),
        layout.op_topic("orders"),
        layout.check_topic("orders"),
        layout.half_topic("billing"),
        layout.operator_topic("ops-admin"),
    ]
    with admin_client(bootstrap_servers) as admin:
        topics = set(admin.list_topics())
        assert set(created) <= topics
        described: Any = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, layout.half_topic("orders"))]
        )
    entry = described["topic"][layout.half_topic("orders")]["message.timestamp.type"]
    assert entry["value"] == "LogAppendTime"
    acl_lines = [line for line in result.output.splitlines() if line.startswith("kafka-acls")]
    # orders has a principal: five grants; billing none; the operator one; the engine four
    # (its two transactional ids, streams/kafka_io/kafka_fence.py).
    assert len(acl_lines) == 10, result.output
    config = load_config(overrides={"kafka.bootstrap_servers": bootstrap_servers})
    for prefix_of_id in (CHECKS_TRANSACTIONAL_PREFIX, NOTICES_TRANSACTIONAL_PREFIX):
        taken = transactional_id(prefix_of_id, config.warehouse)
        for operation in ("Write", "Describe"):
            assert (
                f"kafka-acls.sh --bootstrap-server {bootstrap_servers} --add --allow-principal "
                f"User:{config.kafka.principal} --operation {operation} --transactional-id "
                f"{taken} --resource-pattern-type literal"
            ) in acl_lines
    assert (
        f"kafka-acls.sh --bootstrap-server {bootstrap_servers} --add --allow-principal "
        f"User:orders-app --operation Write --topic {layout.half_topic('orders')} "
        "--resource-pattern-type literal"
    ) in acl_lines
    assert any(
        "User:orders-app --operation Read --group txcoord-sdk-orders" in line for line in acl_lines
    )
    assert any(  # claims: the check of an instance's half goes to that instance first
        f"User:orders-app --operation Write --topic {layout.check_topic('orders')}" in line
        for line in acl_lines
    )
    assert any(
        f"User:ops-admin --operation Write --topic {layout.operator_topic('ops-admin')}" in line
        for line in acl_lines
    )
    again = run(bootstrap_servers, prefix, "--group", "orders=orders-app")
    assert again.exit_code == 2, again.output  # existing topics are left as they are
    assert "kafka-acls.sh" in again.output


def test_provision_refuses_what_cannot_be_laid_out(bootstrap_servers: str, prefix: str) -> None:
    bad = run(bootstrap_servers, prefix, "--group", "a%b")
    assert bad.exit_code == 2
    assert "cannot have Kafka topics of its own" in bad.output
    shared = CliRunner().invoke(main, ["provision", "--group", "orders"])
    assert shared.exit_code != 0
    assert "topics_per_group = true" in shared.output


def test_provision_makes_a_consumer_groups_offsets_topic_and_prints_its_grants(
    bootstrap_servers: str, prefix: str
) -> None:
    offsets, deliveries = f"{prefix}-offsets", f"{prefix}-deliveries"
    result = run(
        bootstrap_servers, prefix, "--consumer-group", "ledger=ledger-app",
        "--set", f"kafka.consumer_offsets_topic={offsets}",
        "--set", f"kafka.deliveries_topic={deliveries}",
    )  # fmt: skip
    assert result.exit_code == 2, result.output  # no authorizer on the test broker
    assert f"consumer group ledger: offsets topic {offsets}.ledger" in result.output
    with admin_client(bootstrap_servers) as admin:
        described: Any = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, f"{offsets}.ledger")]
        )
    assert described["topic"][f"{offsets}.ledger"]["cleanup.policy"]["value"] == "compact"
    acl_lines = [line for line in result.output.splitlines() if line.startswith("kafka-acls")]
    for operation, kind, name in (
        ("Read", "--topic", f"{offsets}.ledger"),
        ("Write", "--topic", f"{offsets}.ledger"),
        ("Read", "--topic", deliveries),
        ("Read", "--group", "txcoord-consumer-ledger"),
    ):
        assert any(
            f"User:ledger-app --operation {operation} {kind} {name} " in line for line in acl_lines
        ), (operation, name, result.output)
    assert sum("User:ledger-app" in line for line in acl_lines) == 4, result.output
    bad = run(bootstrap_servers, prefix, "--consumer-group", "a.b=x")
    assert bad.exit_code == 2 and "offsets topic of its own" in bad.output, bad.output
