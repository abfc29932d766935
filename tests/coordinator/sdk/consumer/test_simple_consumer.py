"""The simple consumer against the real engine: a group divides the queues, reads every
committed message once in queue order, filters by tag, redelivers what was not acked, and a
restarted group goes on from its committed offsets."""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from dataclasses import replace
from typing import Any

import pytest
from click.testing import CliRunner

from coordinator.commands.consumers import consumers
from coordinator.core.config import Config
from coordinator.kafka_clients.admin import delete_topic
from coordinator.kafka_clients.offsets_topic import ensure_offsets_topic
from coordinator.sdk.consumer import MessageView, SimpleConsumer
from coordinator.sdk.consumer.offset_store import OffsetStore
from tests.harness import Engine, Producer, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

TOPIC = "Billing"
QUEUES = 8


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


@pytest.fixture(autouse=True)
def _group_log(caplog: pytest.LogCaptureFixture) -> None:
    """A failure's report carries the group's story: each member's generations and queues
    (the consumer's INFO lines) and kafka-python's joins, leaves and lost memberships."""
    caplog.set_level(logging.INFO, logger="coordinator.sdk.consumer")
    caplog.set_level(logging.INFO, logger="kafka.coordinator")


def consumer(config: Config, group: str, subscriptions: Any, **options: Any) -> SimpleConsumer:
    kafka = config.kafka
    return SimpleConsumer(
        group,
        subscriptions,
        bootstrap_servers=kafka.bootstrap_servers,
        warehouse=config.warehouse,
        deliveries_topic=kafka.deliveries_topic,
        offsets_topic=kafka.consumer_offsets_topic,
        **options,
    )


def commit(config: Config, txs: list[str], *, tags: str | None = None) -> None:
    """Send and commit `txs`, spread over the QUEUES queues of TOPIC."""
    producer = Producer(config)
    try:
        for i, tx in enumerate(txs):
            producer.half(tx, topic=TOPIC, queue_id=i % QUEUES, tags=tags)
        producer.flush()
        for tx in txs:
            producer.op(tx, "COMMIT")
        producer.flush()
    finally:
        producer.close()


class Pump:
    """Receives and acks with every consumer in turn, keeping what came."""

    def __init__(self, consumers: list[SimpleConsumer]) -> None:
        self.consumers = consumers
        self.got: list[MessageView] = []

    def once(self) -> None:
        for c in self.consumers:
            for message in c.receive(max_messages=64, wait_seconds=0.2):
                self.got.append(message)
                assert c.ack(message)

    def until(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.got) < count:
            assert time.monotonic() < deadline, (
                f"{len(self.got)} of {count} in {timeout} s; "
                + "; ".join(json.dumps(c.describe()) for c in self.consumers)
            )
            self.once()


def test_a_group_of_two_reads_every_message_once_in_queue_order(
    config: Config, engine: Engine
) -> None:
    first = [f"a-{i}" for i in range(80)]
    commit(config, first)  # before the group exists: start_from="first" reads them
    members = [consumer(config, "billing", [TOPIC], start_from="first") for _ in range(2)]
    for member in members:
        member.start()
    try:
        pump = Pump(members)

        def joined() -> bool:
            pump.once()
            return all(len(m.members) == 2 for m in members)

        wait_for(joined, 60, "both members in one generation")
        later = [f"b-{i}" for i in range(80)]
        commit(config, later)
        pump.until(160, 120)
        got = pump.got
        assert sorted(m.transaction_id for m in got) == sorted(first + later)
        by_queue: dict[int, list[int]] = defaultdict(list)
        for message in got:
            by_queue[message.queue_id].append(message.queue_offset)
        assert set(by_queue) == set(range(QUEUES))
        for offsets in by_queue.values():
            assert offsets == list(range(len(offsets)))  # dense, in order, once each
        mine = [set(m.assigned()) for m in members]
        assert mine[0].isdisjoint(mine[1]) and len(mine[0] | mine[1]) == QUEUES
        assert all(m.lag() and not any(m.lag().values()) for m in members)
        # The report a stuck member gives (describe): both in one generation, no hand-over
        # under way, each its share of the queues, each read to its end.
        for m in members:
            state = m.describe()
            assert state["members"] == sorted(x.member for x in members), state
            assert not state["handing_over"] and state["queues_known"] == QUEUES, state
            assert [(q["queue_id"], q["committed"] == q["end"]) for q in state["queues"]] == [
                (queue_id, True) for _, queue_id in m.assigned()
            ], state
    finally:
        for member in members:
            member.close()


def test_tags_redelivery_and_a_restart_from_the_committed_offsets(
    config: Config, engine: Engine
) -> None:
    # A group that starts from "last" reads only what is delivered after its first start.
    commit(config, [f"old-{i}" for i in range(8)], tags="A")
    wait_for(lambda: bool(reader_ends(config)), 60, "the old messages delivered")
    c = consumer(config, "audit", {TOPIC: "A || C"}, invisible_duration=1.0).start()
    try:
        assert c.receive(16, 2.0) == []
        commit(config, [f"a-{i}" for i in range(QUEUES)], tags="A")
        commit(config, [f"b-{i}" for i in range(QUEUES)], tags="B")  # not subscribed
        commit(config, [f"c-{i}" for i in range(QUEUES)], tags="C")
        pump = Pump([c])
        pump.until(2 * QUEUES, 120)  # a-* and c-*, acknowledged
        assert sorted(m.transaction_id for m in pump.got) == sorted(
            [f"a-{i}" for i in range(QUEUES)] + [f"c-{i}" for i in range(QUEUES)]
        )
        assert {m.tag for m in pump.got} == {"A", "C"}
        # Not acknowledged: handed out again after the invisible duration, one attempt more.
        commit(config, ["d-0"], tags="A")
        (first,) = c.receive(1, 60)
        assert (first.transaction_id, first.delivery_attempt) == ("d-0", 1)
        (again,) = c.receive(1, 10)
        assert (again.transaction_id, again.delivery_attempt) == ("d-0", 2)
        # Only the latest delivery's receipt settles it (RocketMQ: a new handle per delivery).
        assert not c.ack(first)
        assert c.attempt_in_flight(first.receipt) == 2
        assert c.ack(again) and not c.ack(again)
        lag = c.lag()
        assert lag and not any(lag.values())
    finally:
        c.close()
    # The group's offsets were stored: a new member reads on from them (nothing again).
    commit(config, ["e-0"], tags="C")
    restarted = consumer(config, "audit", {TOPIC: "A || C"}).start()
    try:
        got = restarted.receive(16, 60)
        assert [m.transaction_id for m in got] == ["e-0"]
        assert restarted.ack(got[0])
        # The operator's view: one live member, which reads every queue, and no lag left.
        wait_for(lambda: bool(restarted.receive(1, 0.5)) or stored_lag(config) == 0, 60,
                 "the acknowledgement stored")  # fmt: skip
        listed = cli(config, "list", "--group", "audit", "--json")
        assert listed["members"] == {"audit": [restarted.member]}
        assert {row["reader"] for row in listed["queues"]} == {restarted.member}
        assert {row["queue_id"] for row in listed["queues"]} == set(range(QUEUES))
        refused = CliRunner().invoke(
            consumers, ["reset", "audit", "--topic", TOPIC, "--to", "earliest", *where(config)]
        )
        assert refused.exit_code != 0 and "live member" in refused.output
    finally:
        restarted.close()
    # Stopped, the group can be reset: every message of the topic again (tags A and C).
    cli(config, "reset", "audit", "--topic", TOPIC, "--to", "earliest", as_json=False)
    assert stored_lag(config) == sum(reader_ends(config).values())
    again = consumer(config, "audit", {TOPIC: "A || C"}).start()
    try:
        pump = Pump([again])
        pump.until(8 + 2 * QUEUES + 2, 120)  # old-*, a-*, c-*, d-0, e-0
    finally:
        again.close()


def test_in_the_per_group_layout_a_group_keeps_its_offsets_in_a_topic_of_its_own(
    config: Config, engine: Engine
) -> None:
    """With topics_per_group a group's offsets go to its own topic (which a secured broker
    lets its principal alone write: tests/security/test_consumer_offsets_apart.py), none to
    the shared one, and a new member reads on from them; `txcoord consumers list` finds the
    group by its topic's name."""
    own = replace(config.kafka, topics_per_group=True)
    topic = ensure_offsets_topic(own, "ledger")  # as `txcoord provision --consumer-group` does
    try:
        commit(config, [f"p-{i}" for i in range(QUEUES)])
        first = consumer(config, "ledger", [TOPIC], start_from="first", topics_per_group=True)
        first.start()
        try:
            Pump([first]).until(QUEUES, 120)
        finally:
            first.close()  # stores an offset of 1 per queue
        assert topic == f"{config.kafka.consumer_offsets_topic}.ledger"
        shared = OffsetStore(config.kafka.bootstrap_servers, config.kafka.consumer_offsets_topic)
        try:
            assert "ledger" not in shared.every_group()
        finally:
            shared.close()
        listed = cli(config, "list", "--json", "--set", "kafka.topics_per_group=true")
        assert {(r["group"], r["queue_id"], r["committed"]) for r in listed["queues"]} == {
            ("ledger", q, 1) for q in range(QUEUES)
        }
        commit(config, ["p-late"])
        again = consumer(config, "ledger", [TOPIC], topics_per_group=True).start()
        try:
            got = Pump([again])
            got.until(1, 120)
            assert [m.transaction_id for m in got.got] == ["p-late"]
        finally:
            again.close()
    finally:
        delete_topic(config.kafka.bootstrap_servers, topic)


def where(config: Config) -> list[str]:
    kafka = config.kafka
    return [
        "--warehouse", config.warehouse, "--bootstrap-servers", kafka.bootstrap_servers,
        "--set", f"kafka.consumer_offsets_topic={kafka.consumer_offsets_topic}",
        "--set", f"kafka.deliveries_topic={kafka.deliveries_topic}",
    ]  # fmt: skip


def cli(config: Config, *args: str, as_json: bool = True) -> Any:
    result = CliRunner().invoke(consumers, [*args, *where(config)])
    assert result.exit_code == 0, result.output
    return json.loads(result.output) if as_json else result.output


def stored_lag(config: Config) -> int:
    return sum(row["lag"] for row in cli(config, "list", "--group", "audit", "--json")["queues"])


def reader_ends(config: Config) -> dict[tuple[str, int], int]:
    from coordinator.sdk.consumer.queue_reader import QueueReader  # noqa: PLC0415

    return QueueReader(config.warehouse).ends([TOPIC])


def test_nothing_is_handed_out_from_a_hand_over_to_the_next_generation(
    config: Config, engine: Engine
) -> None:
    """A rebalance begins with each member storing its offsets (`hand_over`, kafka-python's
    revoke callback); the next generation divides the queues and their new owners read on from
    the store. Queues that appear in between must wait for that generation: taken by the old
    one's members, their messages were delivered twice (the REST consumers' test saw a member
    that stood alone hand out two queues the second member then read again from the store)."""
    a = consumer(config, "audit", [TOPIC], start_from="first", refresh_seconds=0.5)
    b = consumer(config, "audit", [TOPIC], start_from="first", refresh_seconds=0.5)
    a.start()
    try:
        wait_for(lambda: not a.receive(wait_seconds=0.2) and a.members == (a.member,), 60,
                 "the first member alone in its group")  # fmt: skip
        a.hand_over()  # as its revoke callback does when a rebalance begins
        txs = [f"h-{i}" for i in range(16)]
        commit(config, txs)
        wait_for(lambda: sum(a.reader.ends([TOPIC]).values()) == len(txs), 120,
                 "the queues in the warehouse")  # fmt: skip
        for _ in range(4):  # each receive reads the queues' ends again (refresh 0.5 s)
            assert a.receive(wait_seconds=1.0) == []
            assert a.assigned() == []
        b.start()  # a real rebalance: the next generation divides the queues
        pump = Pump([a, b])
        pump.until(len(txs), 120)
        assert sorted(m.transaction_id for m in pump.got) == sorted(txs)
        assert set(a.assigned()).isdisjoint(b.assigned())
    finally:
        a.close()
        b.close()


def test_a_rejoin_that_keeps_the_generation_ends_the_hand_over(
    config: Config, engine: Engine
) -> None:
    """A follower that rejoins a stable group (asked to by a heartbeat's error, or a poll late
    on a loaded host) runs the revoke callback, stores its offsets, and is given the same
    generation back: Kafka's coordinator answers a follower whose subscription did not change
    with the current generation. The hand-over must end with that join: waiting for a new
    generation left the member handing out nothing for ever (the REST consumers' test on a
    loaded CI host: '16 of 32 in 180 s', one member's share)."""
    a = consumer(config, "audit", [TOPIC], start_from="first", refresh_seconds=0.5)
    b = consumer(config, "audit", [TOPIC], start_from="first", refresh_seconds=0.5)
    a.start()
    b.start()
    try:
        names = tuple(sorted((a.member, b.member)))
        wait_for(lambda: not Pump([a, b]).once() and a.members == b.members == names, 90,
                 "both members in one generation")  # fmt: skip
        (follower,) = [c for c in (a, b) if not kafka_coordinator(c)._is_leader]
        generation, joins = follower_state(follower)
        kafka_coordinator(follower).request_rejoin()
        wait_for(lambda: not follower.receive(wait_seconds=0.2)
                 and follower_state(follower)[1] > joins, 60, "the follower's rejoin")  # fmt: skip
        assert follower_state(follower)[0] == generation, "the rejoin began a new generation"
        txs = [f"r-{i}" for i in range(16)]
        commit(config, txs)
        pump = Pump([a, b])
        pump.until(len(txs), 120)
        assert sorted(m.transaction_id for m in pump.got) == sorted(txs)
        assert a.assigned() and b.assigned() and set(a.assigned()).isdisjoint(b.assigned())
    finally:
        a.close()
        b.close()


def kafka_coordinator(member: SimpleConsumer) -> Any:
    """Return kafka-python's group coordinator of `member` (to ask for a rejoin, as its
    heartbeat does on an error)."""
    return member._membership._consumer._coordinator  # type: ignore[union-attr]


def follower_state(member: SimpleConsumer) -> tuple[int, int]:
    """Return the member's generation and the joins it has completed."""
    membership = member._membership
    assert membership is not None
    return membership.generation, membership.assignments


def test_an_upgrade_to_per_group_offsets_copies_a_groups_shared_offsets_once(
    config: Config, engine: Engine
) -> None:
    """A group that committed in the shared offsets topic, moved to the per-group layout:
    `txcoord consumers reset G --to shared` copies its offsets into its own topic once, so
    that it reads on from where it was instead of from its start (docs/consumers.md)."""
    commit(config, [f"u-{i}" for i in range(QUEUES)])
    before = consumer(config, "upgraded", [TOPIC], start_from="first").start()
    try:
        Pump([before]).until(QUEUES, 120)
    finally:
        before.close()  # stores an offset of 1 per queue, in the shared topic
    own = replace(config.kafka, topics_per_group=True)
    topic = ensure_offsets_topic(own, "upgraded")
    try:
        shared_only = CliRunner().invoke(
            consumers, ["reset", "upgraded", "--topic", TOPIC, "--to", "shared", *where(config)]
        )
        assert shared_only.exit_code != 0 and "topics_per_group" in shared_only.output
        per_group = ["--set", "kafka.topics_per_group=true"]
        moved = cli(config, "reset", "upgraded", "--topic", TOPIC, "--to", "shared", *per_group,
                    as_json=False)  # fmt: skip
        assert moved.splitlines() == [f"upgraded {TOPIC}/{q} -> 1" for q in range(QUEUES)]
        commit(config, ["u-late"])
        after = consumer(config, "upgraded", [TOPIC], topics_per_group=True).start()
        try:
            got = Pump([after])
            got.until(1, 120)
            assert [m.transaction_id for m in got.got] == ["u-late"]
        finally:
            after.close()
    finally:
        delete_topic(config.kafka.bootstrap_servers, topic)
