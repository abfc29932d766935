"""Issue 61, finding 1 (the Kafka path): one consumer group cannot move another's offsets.

Before, every consumer group's committed offsets went to one topic, `[kafka]
consumer_offsets_topic`, which every consumer's principal had to write: any of them could move
any group's offsets (back, so that the group reads again what it had read; forward, past what
it never read), and `txcoord provision` granted consumers nothing. Now, in the per-group
layout, each consumer group has an offsets topic of its own, `<consumer_offsets_topic>.<group>`
(made by `txcoord provision --consumer-group`), and `consumer_grants` lets only that group's
principal read and write it, besides the deliveries topic and its own Kafka consumer group.

Against a real secured broker (SASL SCRAM, Kafka's StandardAuthorizer, deny by default, the
ACLs `consumer_grants` gives): a real SDK consumer, as its group's principal, stores its
offsets in its group's topic and a new member reads on from them; the broker refuses that
principal a write to another group's offsets topic, a read of it, and another group's
membership; a record a principal writes into its own topic naming another group moves
nothing of that group's; the REST ingress makes its own consumer groups' topics; and
`txcoord provision`'s check finds a grant that opens one group's topic to another principal.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ConfigResource,
    ConfigResourceType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

from coordinator.admin.offsets_acls import offsets_findings
from coordinator.core.config import Config
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import Grant, consumer_grants
from coordinator.kafka_clients.admin import admin_client
from coordinator.kafka_clients.offsets_topic import ensure_offsets_topic
from coordinator.rest.consumers import ConsumerMembers, Subscription
from coordinator.runtime.local_stack.broker_auth import BrokerPrincipal
from coordinator.sdk.consumer import MessageView, SimpleConsumer
from coordinator.sdk.consumer.membership import GroupMembership
from coordinator.sdk.consumer.offset_store import OffsetStore
from streams.kafka_io.delivery_notices import ensure_consumer_topics
from tests.coordinator.sdk.helpers import wait_until
from tests.coordinator.secured.conftest import SecuredKafka, start_secured
from tests.security.conftest import deliver

pytestmark = [pytest.mark.kafka, pytest.mark.long]

#: Consumer group -> the SASL user its members log in as.
CONSUMERS = {"ledger": "ledger-app", "audit": "audit-app"}
TOPIC = "OrderPaid"


@dataclass(frozen=True)
class Stack:
    """The secured broker, the engine's configuration and each consumer group's settings."""

    secured: SecuredKafka
    security: dict[str, KafkaSecurity]

    @property
    def config(self) -> Config:
        return self.secured.config

    def store(self, group: str | None, security: KafkaSecurity) -> OffsetStore:
        """Return an offset store of the per-group layout as `security`'s principal."""
        kafka = self.config.kafka
        return OffsetStore(
            kafka.bootstrap_servers,
            kafka.consumer_offsets_topic,
            security,
            per_group=True,
            group=group,
        )


def consumer_principal(stack: SecuredKafka, name: str, folder: Path) -> KafkaSecurity:
    """Add SCRAM user `name` (as the engine) and return how it connects."""
    password = folder / f"{name}.password"
    password.write_text(f"{name}-password-0123456789")
    password.chmod(0o600)
    with admin_client(stack.bootstrap_servers, security=stack.security_of()) as admin:
        admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(name, ScramMechanism.SCRAM_SHA_256, password.read_text())]
        )
    return BrokerPrincipal(name, password).security()


def grant(stack: SecuredKafka, wanted: list[Grant]) -> None:
    """Create `wanted` as literal ALLOW ACLs; return once the broker lists them all."""
    acls = [
        ACL(
            f"User:{g.principal}", "*", ACLOperation[g.operation], ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType[g.resource], g.name, ACLResourcePatternType.LITERAL),
        )
        for g in wanted
    ]  # fmt: skip
    every = ACLFilter(
        None,
        None,
        ACLOperation.ANY,
        ACLPermissionType.ANY,
        ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY),
    )
    with admin_client(stack.bootstrap_servers, security=stack.security_of()) as admin:
        assert not admin.create_acls(acls)["failed"]
        mine = {(g.principal, g.name, g.operation) for g in wanted}

        def listed() -> bool:
            found, _ = admin.describe_acls(every)
            seen = {
                (a.principal.removeprefix("User:"), a.resource_pattern.resource_name,
                 ACLOperation(a.operation).name)
                for a in found
            }  # fmt: skip
            return mine <= seen

        wait_until(listed, 30, "the consumer groups' ACLs in the broker")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("offsets-apart")
    secured = start_secured(root)  # the per-group layout, the engine a super user
    try:
        security = {g: consumer_principal(secured, who, root) for g, who in CONSUMERS.items()}
        ensure_consumer_topics(secured.config)  # the deliveries topic, the engine's
        for group in CONSUMERS:  # as `txcoord provision --consumer-group GROUP=...` does
            ensure_offsets_topic(secured.config.kafka, group)
        grant(secured, consumer_grants(secured.layout, CONSUMERS))
        yield Stack(secured, security)
    finally:
        secured.broker.stop()


def member(stack: Stack, group: str) -> SimpleConsumer:
    """Return an SDK consumer of `group`, as its group's principal, per-group layout."""
    kafka = stack.config.kafka
    return SimpleConsumer(
        group,
        [TOPIC],
        bootstrap_servers=kafka.bootstrap_servers,
        warehouse=stack.config.warehouse,
        start_from="first",
        deliveries_topic=kafka.deliveries_topic,
        offsets_topic=kafka.consumer_offsets_topic,
        topics_per_group=True,
        security=stack.security[group],
    )


def receive_all(consumer: SimpleConsumer, count: int) -> list[MessageView]:
    """Return the first `count` messages handed out (60 s at most)."""
    got: list[MessageView] = []
    deadline = time.monotonic() + 60
    while len(got) < count:
        assert time.monotonic() < deadline, f"{len(got)} of {count} received"
        got += consumer.receive(max_messages=count - len(got), wait_seconds=1.0)
    return got


def test_a_consumer_group_stores_its_offsets_in_its_own_topic_and_reads_on(stack: Stack) -> None:
    deliver(stack.config, TOPIC, [b"a", b"b", b"c"])
    first = member(stack, "ledger").start()
    try:
        got = receive_all(first, 3)
        assert [m.body for m in got] == [b"a", b"b", b"c"]
        assert all(first.ack(m) for m in got[:2])  # the third is not acknowledged
    finally:
        first.close()  # stores the group's offset: 2, the first not acknowledged
    store = stack.store("ledger", stack.security["ledger"])
    try:
        assert store.load("ledger") == {(TOPIC, 0): 2}
    finally:
        store.close()
    again = member(stack, "ledger").start()
    try:
        assert [m.body for m in receive_all(again, 1)] == [b"c"]
    finally:
        again.close()


def test_the_rest_ingress_makes_its_consumer_groups_offsets_topic(stack: Stack) -> None:
    """REST members run as the engine: the ingress makes a consumer group's offsets topic,
    compacted, before the group's first member starts (no client makes one by writing)."""
    members = ConsumerMembers(stack.config)
    try:
        members.receive(
            "billing", None, Subscription(TOPIC, "*"), max_messages=1, wait_seconds=0.5,
            invisible_seconds=30, start_from="first",
        )  # fmt: skip
    finally:
        members.close()
    topic = stack.secured.layout.offsets_topic("billing")
    engine = stack.secured.security_of()
    with admin_client(stack.config.kafka.bootstrap_servers, security=engine) as admin:
        described: Any = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    assert described["topic"][topic]["cleanup.policy"]["value"] == "compact"


def refused_write(security: KafkaSecurity, bootstrap: str, topic: str) -> bool:
    """Return True if the broker refuses `security`'s principal a write to `topic`."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", max_block_ms=20_000, **security.client_options()
    )
    try:
        producer.send(topic, key=b'["audit", "OrderPaid", 0]', value=b'{"offset": 0}').get(30)
    except TopicAuthorizationFailedError:
        return True
    finally:
        producer.close(timeout=5)
    return False


def test_a_consumer_group_cannot_move_nor_read_another_groups_offsets(stack: Stack) -> None:
    kafka, layout = stack.config.kafka, stack.secured.layout
    ledger, audit = stack.security["ledger"], stack.security["audit"]
    audits = stack.store("audit", audit)
    try:
        audits.commit("audit", "audit-1", {(TOPIC, 0): 7})
    finally:
        audits.close()
    # Before, both wrote the one offsets topic; now ledger's principal may not write audit's.
    assert refused_write(ledger, kafka.bootstrap_servers, layout.offsets_topic("audit"))
    assert not refused_write(ledger, kafka.bootstrap_servers, layout.offsets_topic("ledger"))
    # Nor read it, nor join audit's Kafka group (its members' generations).
    with pytest.raises((ValueError, TopicAuthorizationFailedError)):
        stack.store("audit", ledger).close()
    membership = GroupMembership(
        kafka.bootstrap_servers, "audit", "intruder", deliveries_topic=kafka.deliveries_topic,
        security=ledger,
    )  # fmt: skip
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                membership.poll(0.5)
    finally:
        membership.close()
    # What ledger writes in its own topic naming audit is ledger's doing: it moves nothing of
    # audit's, for audit's members nor for the operator's listing (coordinator/admin/).
    producer = KafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers, acks="all", **ledger.client_options()
    )
    try:
        producer.send(
            layout.offsets_topic("ledger"),
            key=b'["audit", "OrderPaid", 0]',
            value=b'{"offset": 99, "member": "forged", "at": 1}',
        ).get(30)
    finally:
        producer.close(timeout=5)
    operator = stack.store(None, stack.secured.security_of())  # the engine's principal
    try:
        every = operator.every_group()
        assert {q: s.offset for q, s in every["audit"].items()} == {(TOPIC, 0): 7}
        assert operator.load("audit") == {(TOPIC, 0): 7}
    finally:
        operator.close()


def test_provisions_check_finds_a_grant_that_opens_another_groups_offsets(stack: Stack) -> None:
    """`txcoord provision --consumer-group` looks for the mistake that undoes all of this: a
    prefixed grant on the offsets topics' prefix gives one principal every group's."""
    config = stack.config
    assert offsets_findings(config, CONSUMERS) == []  # literal grants only
    broad = ACL(
        "User:audit-app", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
        ResourcePattern(
            ResourceType.TOPIC, config.kafka.consumer_offsets_topic, ACLResourcePatternType.PREFIXED
        ),
    )  # fmt: skip
    with admin_client(config.kafka.bootstrap_servers, security=stack.secured.security_of()) as a:
        a.create_acls([broad])
        try:
            found: list[str] = []

            def seen() -> bool:
                found[:] = offsets_findings(config, CONSUMERS)
                return bool(found)

            wait_until(seen, 30, "the prefixed grant in the broker's ACLs")
        finally:
            a.delete_acls([broad])
    ledger_topic = stack.secured.layout.offsets_topic("ledger")
    assert found == [
        f"User:audit-app may WRITE the offsets topic of consumer group 'ledger' ({ledger_topic}) "
        f"through the prefixed grant on {config.kafka.consumer_offsets_topic!r}: it can move "
        "that group's offsets (grant literal names only: kafka-acls.sh --remove ...)"
    ]
