"""Checks go first to the producer instance that sent the half (contract 5.3), over Kafka.

Two instances of one group share the check topic's two partitions, one each. A check
addressed to an instance is answered by that instance, whichever partition it is on: the
partition's other owner holds it and lets it go when the sender's claim comes. Once an
instance is stopped, its checks are answered by the live one after the delay.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import NewPartitions

from coordinator.kafka_clients.admin import admin_client
from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_claim import CheckClaim, is_claim
from coordinator.sdk import TransactionProducer, kafka_transport
from streams.query.batch_writer import check_record

from .conftest import ProducerFactory, SdkTopics, group_members, publish, read_records
from .helpers import RecordingListener, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.long]

#: Long enough that a loaded machine's sender always claims first.
SENDER_FIRST_SECONDS = 5.0


def addressed_check(transaction_id: str, group: str, instance: str | None) -> Any:
    """Return the check record the coordinator writes for a half `instance` sent."""
    properties = {"region": "eu"}
    if instance is not None:
        properties[fmt.PRODUCER_INSTANCE_PROPERTY] = instance
    row = {
        "transaction_id": transaction_id, "msg_id": "0000000000000000002A",
        "producer_group": group, "topic": "OrderPaid", "queue_id": 1, "body": b"paid",
        "keys": ["o-1"], "tags": "paid", "properties": properties, "check_number": 1,
        "prepared_ms": 1_700_000_000_000, "at_ms": 1_700_000_006_000,
    }  # fmt: skip
    return check_record(row)


def asked(listener: RecordingListener) -> set[str]:
    with listener.lock:
        return {request.transaction_id for request in listener.checked}


def two_instances(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> tuple[TransactionProducer, RecordingListener, TransactionProducer, RecordingListener]:
    listeners = RecordingListener(), RecordingListener()
    a, b = (
        make_producer(listener, instance_id=name, check_sender_first_seconds=SENDER_FIRST_SECONDS)
        for name, listener in zip(("a", "b"), listeners, strict=True)
    )
    group = sdk_topics.group
    wait_until(lambda: group_members(sdk_topics.bootstrap_servers, group) == 2, 60, "2 members")
    return a, listeners[0], b, listeners[1]


def test_each_check_is_answered_by_the_instance_that_sent_its_half(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    _, a_listener, _, b_listener = two_instances(sdk_topics, make_producer)
    group = sdk_topics.group
    sent = {
        name: [f"{name}-{i}" for i in range(20)] for name in ("a", "b")
    }  # keyed by transaction id: both partitions get some of each
    anyone = [f"anyone-{i}" for i in range(4)]
    records = [addressed_check(tx, group, name) for name, txs in sent.items() for tx in txs]
    publish(sdk_topics.bootstrap_servers, sdk_topics.check, records)
    publish(
        sdk_topics.bootstrap_servers,
        sdk_topics.check,
        [addressed_check(tx, group, None) for tx in anyone],
    )
    every = {*sent["a"], *sent["b"], *anyone}
    wait_until(lambda: asked(a_listener) | asked(b_listener) >= every, 60, "every check")
    # Within the delay: each sender answered its own, wherever they were.
    assert asked(a_listener) >= set(sent["a"])
    assert asked(b_listener) >= set(sent["b"])
    # And after it: the owners let the claimed checks go, nobody answered twice. The marker
    # that the delay is over: a check for an instance that does not exist, published now on
    # each partition, is answered by the partition's owner once its own delay is over; a
    # holder lets its checks go oldest first, so by then every earlier one was let go (or,
    # wrongly, answered).
    ghosts = {partition: f"ghost-{partition}" for partition in (0, 1)}
    for partition, tx in ghosts.items():
        publish(sdk_topics.bootstrap_servers, sdk_topics.check,
                [addressed_check(tx, group, "ghost")], partition=partition)  # fmt: skip
    wait_until(lambda: asked(a_listener) | asked(b_listener) >= set(ghosts.values()), 60,
               "the checks for a missing instance, after the delay")  # fmt: skip
    assert not asked(a_listener) & set(sent["b"])
    assert not asked(b_listener) & set(sent["a"])
    assert not asked(a_listener) & asked(b_listener) & set(anyone)
    a_counts, b_counts = a_listener.check_counts(), b_listener.check_counts()
    assert max((a_counts + b_counts).values()) == 1
    # The claims are on the check topic, one per check answered on the other's partition.
    claims = [
        CheckClaim.decode(r.value)
        for r in read_records(
            sdk_topics.bootstrap_servers, sdk_topics.check, len(records) + 4 + len(ghosts)
        )
        if is_claim(r.headers)
    ]
    assert {claim.producer_instance for claim in claims} == {"a", "b"}
    for claim in claims:
        assert claim.transaction_id in sent[claim.producer_instance]
        assert claim.producer_group == group


def test_a_stopped_instances_checks_go_to_a_live_one_after_the_delay(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    a, a_listener, _, b_listener = two_instances(sdk_topics, make_producer)
    a.shutdown(timeout=1)
    group = sdk_topics.group
    wait_until(lambda: group_members(sdk_topics.bootstrap_servers, group) == 1, 60, "1 member")
    orphans = [f"orphan-{i}" for i in range(6)]
    published = time.monotonic()
    publish(
        sdk_topics.bootstrap_servers,
        sdk_topics.check,
        [addressed_check(tx, sdk_topics.group, "a") for tx in orphans],
    )
    wait_until(lambda: asked(b_listener) >= set(orphans), 60, "b to answer a's checks")
    waited = time.monotonic() - published
    # b held them for the sender first (they may have been read a little after publishing).
    assert waited >= SENDER_FIRST_SECONDS - 0.5, waited
    assert not asked(a_listener) & set(orphans)
    ops = read_records(sdk_topics.bootstrap_servers, sdk_topics.op, len(orphans))
    assert sorted(r.key.decode() for r in ops) == orphans
    assert all(dict(r.headers)[fmt.FROM_CHECK] == b"true" for r in ops)


def test_the_sender_reads_partitions_added_to_the_check_topic(
    sdk_topics: SdkTopics, make_producer: ProducerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator grows the check topic: the sender's reader of its own checks reads the
    new partition from its start, and the old ones on from where it was (nothing twice)."""
    monkeypatch.setattr(kafka_transport, "_PARTITIONS_REFRESH_SECONDS", 1.0)
    listener = RecordingListener()
    make_producer(listener, instance_id="a", check_sender_first_seconds=SENDER_FIRST_SECONDS)
    group, bootstrap = sdk_topics.group, sdk_topics.bootstrap_servers
    publish(bootstrap, sdk_topics.check, [addressed_check("before", group, "a")], partition=0)
    wait_until(lambda: "before" in asked(listener), 30, "the check on an old partition")
    with admin_client(bootstrap) as admin:
        admin.create_partitions({sdk_topics.check: NewPartitions(3)})
    # The group's own consumer learns of the partition only at its next metadata refresh
    # (minutes): within the test, only the sender's reader can have read it.
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        key, value, headers = addressed_check("on-the-new-one", group, "a")
        producer.send(sdk_topics.check, key=key, value=value, headers=headers, partition=2)
        producer.flush(30)
    finally:
        producer.close()
    wait_until(lambda: "on-the-new-one" in asked(listener), 30, "the check on the new partition")
    # A rewound old partition would hand "before" again ahead of a check published after it.
    publish(bootstrap, sdk_topics.check, [addressed_check("after", group, "a")], partition=0)
    wait_until(lambda: "after" in asked(listener), 30, "a later check on the old partition")
    assert listener.check_counts()[("before", 1)] == 1
    assert listener.check_counts()[("on-the-new-one", 1)] == 1
