"""Consumer groups in the topic layout: an offsets topic of each group's own, and its ACLs.

In the per-group layout (`[kafka] topics_per_group`) a consumer group's committed offsets go
to `<consumer_offsets_topic>.<group>`, and `consumer_grants` gives the group's principal that
topic, the deliveries topic and its Kafka consumer group, and nothing of another group's
(issue 61, finding 1: before, one shared offsets topic that every consumer had to write).
"""

from __future__ import annotations

import pytest

from coordinator.core.config import load_config
from coordinator.core.topics import (
    KAFKA_TOPIC_MAX,
    Grant,
    TopicLayout,
    consumer_grants,
    consumer_kafka_group,
    grants,
)
from coordinator.sdk.consumer.membership import kafka_group_id

PER_GROUP = TopicLayout(per_group=True)


def test_each_consumer_group_has_an_offsets_topic_of_its_own_in_the_per_group_layout() -> None:
    assert PER_GROUP.offsets_topic("billing") == "txcoord.consumer-offsets.billing"
    assert PER_GROUP.offsets_topic("Audit_v2-x") == "txcoord.consumer-offsets.Audit_v2-x"
    # The shared layout keeps the one topic of every group.
    assert TopicLayout().offsets_topic("billing") == "txcoord.consumer-offsets"
    # Named from the configuration, as the other topics are.
    layout = load_config(
        overrides={
            "kafka.topics_per_group": "true",
            "kafka.consumer_offsets_topic": "acme.offsets",
            "kafka.deliveries_topic": "acme.deliveries",
        }
    ).kafka.layout
    assert layout.offsets_topic("billing") == "acme.offsets.billing"
    assert layout.deliveries == "acme.deliveries"


def test_an_offsets_topic_names_its_group_and_nothing_else_does() -> None:
    for group in ("billing", "a", "x" * (KAFKA_TOPIC_MAX - len(PER_GROUP.offsets) - 1)):
        assert PER_GROUP.offsets_group_of(PER_GROUP.offsets_topic(group)) == group
    for topic in (
        "txcoord.consumer-offsets",  # the shared one
        "txcoord.consumer-offsets.",
        "txcoord.consumer-offsets.a.b",
        "txcoord.consumer-offsetsX.billing",
        "txcoord.half.billing",
        "txcoord.deliveries",
    ):
        assert PER_GROUP.offsets_group_of(topic) is None, topic
    assert TopicLayout().offsets_group_of("txcoord.consumer-offsets.billing") is None


@pytest.mark.parametrize(
    ("group", "why"),
    [
        ("a.b", "letters, digits, '_' and '-' only"),
        ("a%b", "letters, digits, '_' and '-' only"),
        ("", "letters, digits, '_' and '-' only"),
        ("x" * (KAFKA_TOPIC_MAX - len(PER_GROUP.offsets)), "at most 224 characters"),
    ],
)
def test_a_consumer_group_no_topic_can_name_is_refused(group: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        PER_GROUP.offsets_topic(group)


def test_a_consumer_groups_principal_gets_its_own_offsets_topic_and_nothing_of_another() -> None:
    found = consumer_grants(PER_GROUP, {"billing": "billing-app", "audit": "audit-app"})
    assert found == [
        Grant("audit-app", "READ", "TOPIC", "txcoord.consumer-offsets.audit"),
        Grant("audit-app", "WRITE", "TOPIC", "txcoord.consumer-offsets.audit"),
        Grant("audit-app", "READ", "TOPIC", "txcoord.deliveries"),
        Grant("audit-app", "READ", "GROUP", "txcoord-consumer-audit"),
        Grant("billing-app", "READ", "TOPIC", "txcoord.consumer-offsets.billing"),
        Grant("billing-app", "WRITE", "TOPIC", "txcoord.consumer-offsets.billing"),
        Grant("billing-app", "READ", "TOPIC", "txcoord.deliveries"),
        Grant("billing-app", "READ", "GROUP", "txcoord-consumer-billing"),
    ]
    # The Kafka group granted is the one the SDK's members join.
    assert kafka_group_id("billing") == consumer_kafka_group("billing")


def test_one_principal_of_two_consumer_groups_gets_each_grant_once() -> None:
    found = consumer_grants(PER_GROUP, {"billing": "ops-app", "audit": "ops-app"})
    assert len(found) == len(set(found)) == 7  # the deliveries topic once
    assert {g.name for g in found if g.operation == "WRITE"} == {
        "txcoord.consumer-offsets.audit",
        "txcoord.consumer-offsets.billing",
    }


def test_consumer_and_producer_groups_of_one_name_share_no_resource() -> None:
    as_consumer = {g.name for g in consumer_grants(PER_GROUP, {"orders": "x"})}
    as_producer = {g.name for g in grants(PER_GROUP, {"orders": "x"})}
    assert as_consumer.isdisjoint(as_producer)


def test_the_shared_layout_keeps_no_consumer_group_apart() -> None:
    with pytest.raises(ValueError, match="topics_per_group = true"):
        consumer_grants(TopicLayout(), {"billing": "billing-app"})
