"""RocketMQ's official Java PushConsumer against txcoord, unchanged but for its endpoint
(docs/rocketmq.md): a consumer group of two push consumers splits the topic's queues
(QueryAssignment), each committed message is consumed once, by the consumer whose queue it
is, in queue order; when one consumer shuts down (NotifyClientTermination) the other gets its
queues and consumes what is committed after, once each. And the official Python client's
PushConsumer, in a group of its own: each message once, in queue order, and one its listener
failed comes again after the backoff the endpoint's Settings gave it.

One engine (this process's Spark), one endpoint process and one transactional producer (the
official Python client) serve the module; the consumers are the Java peer's `push` mode
(deploy/jvm/rocketmq-peer/, one consumption thread, so its listener sees a queue's messages
in the order they came).
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import SparkSession
from rocketmq.grpc_protocol import TransactionResolution
from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer, TransactionChecker

from coordinator.core.config import Config, load_config
from coordinator.rest.auth import sha256_hex
from tests.conftest import settings_under
from tests.coordinator.rocketmq.endpoint_process import client_configuration, endpoint_process
from tests.coordinator.rocketmq.java_peer import JavaPeer
from tests.harness import Engine

pytestmark = [
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.long,
    # The client's own logging calls logger.warn.
    pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning"),
]

TOPIC = "PushOrders"
GROUP = "push-readers"
#: The Python client's push consumer's group.
PY_GROUP = "py-push-readers"
QUEUES = 4
PRODUCER = "push-app"
PRODUCER_TOKEN = "push-app-token-0123456789abcdef01"
READER = "push-reader"
READER_TOKEN = "push-reader-token-0123456789abcd"
#: Seconds to wait for what a batch of the engine, a join of the group or a rescan of the
#: assignment (every 5 s) brings, on a loaded machine.
TIMEOUT = 150
#: Messages of each phase: enough that every queue has some (crc32 of the id picks it).
SPLIT, AFTER = 40, 32
#: The hand-over's bound: under the 60 s after which the endpoint closes a member nobody
#: calls (rest's idle timeout), so that only the termination can have handed the queues over.
HAND_OVER_TIMEOUT = 55
#: How long a marker is waited for before another is committed: one committed before the
#: group began (its first member's start) never comes; a later one that comes counts too.
MARKER_WAIT = 6


class Committer(TransactionChecker):  # type: ignore[misc]
    """Every transaction here is committed by its producer; a check (none is expected)
    commits too."""

    def check(self, message: Message) -> Any:
        return TransactionResolution.COMMIT


def write_auth_file(path: Path) -> Path:
    path.write_text(
        f'[[token]]\nname = "{PRODUCER}"\ngroup = "push-orders"\n'
        f'sha256 = "{sha256_hex(PRODUCER_TOKEN)}"\n\n'
        f'[[token]]\nname = "{READER}"\nsha256 = "{sha256_hex(READER_TOKEN)}"\n'
        f'[[token.consume]]\ngroup = "{GROUP}"\ntopics = ["{TOPIC}"]\n'
        f'[[token.consume]]\ngroup = "{PY_GROUP}"\ntopics = ["{TOPIC}"]\n'
    )
    path.chmod(0o600)
    return path


class Stack:
    """The module's engine configuration, endpoint address and producer."""

    def __init__(self, config: Config, address: str, producer: Producer) -> None:
        self.config, self.address, self.producer = config, address, producer


@pytest.fixture(scope="module")
def stack(
    spark: SparkSession, bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("rocketmq-push")
    settings = settings_under(
        root,
        bootstrap_servers,
        auto_create_topic_enable="false",
        topics=TOPIC,
        default_queue_count=str(QUEUES),
        **{
            "rest.auth_file": str(write_auth_file(root / "auth.toml")),
            # The push consumers' long polling timeout (push.py): a consumer's shutdown waits
            # for its receives in flight.
            "rest.check_poll_max_wait": "5s",
        },
    )
    config = load_config(overrides=settings)
    engine = Engine(spark, config)
    try:
        with endpoint_process(settings) as address:
            configuration = client_configuration(address, PRODUCER, sha256_hex(PRODUCER_TOKEN))
            producer = Producer(configuration, (TOPIC,), Committer())
            producer.startup()
            try:
                yield Stack(config, address, producer)
            finally:
                producer.shutdown()
    finally:
        engine.stop()


def commit(producer: Producer, keys: list[str]) -> list[str]:
    """Send and commit one transaction per key; return their ids (the message ids)."""
    ids = []
    for key in keys:
        transaction = producer.begin_transaction()
        message = Message()
        message.topic, message.body, message.keys = TOPIC, f"body of {key}".encode(), key
        receipt = producer.send(message, transaction)
        transaction.commit()
        ids.append(receipt.transaction_id)
    return ids


def positions(config: Config) -> dict[str, tuple[int, int]]:
    """Return each delivered message's (queue id, queue offset), as the topic table says."""
    try:
        table = DeltaTable(f"{config.warehouse}/topics/{TOPIC}")
    except TableNotFoundError:
        return {}
    rows = [SimpleNamespace(**row) for row in table.to_pyarrow_table().to_pylist()]
    return {r.transaction_id: (r.queue_id, r.queue_offset) for r in rows}


def markers_until(
    producer: Producer, consumed: Any, done: Any, what: str, prefix: str = "marker-"
) -> None:
    """Commit a marker at a time, each waited for up to MARKER_WAIT (`consumed(id)`), until
    `done()`; fail after TIMEOUT."""
    deadline = time.monotonic() + TIMEOUT
    while not done():
        assert time.monotonic() < deadline, f"never: {what}"
        (marker,) = commit(producer, [f"{prefix}{time.monotonic_ns()}"])
        end = min(deadline, time.monotonic() + MARKER_WAIT)
        while not consumed(marker) and time.monotonic() < end:
            time.sleep(0.2)


def received(peer: JavaPeer, prefix: str) -> list[dict[str, Any]]:
    """Return what `peer`'s listener consumed of the keys starting with `prefix`, in order."""
    return [e for e in peer.of("received") if e["key"].startswith(prefix)]


def wait_until(condition: Any, what: str, *peers: JavaPeer, timeout: float = TIMEOUT) -> None:
    """Wait up to `timeout` for `condition`; fail with the peers' output."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never: {what}\n" + "\n---\n".join(p.tail() for p in peers))
        time.sleep(0.2)


def check_queues(events: list[dict[str, Any]], where: dict[str, tuple[int, int]]) -> set[int]:
    """Check that each message came on its own queue, each queue's in queue-offset order;
    return the queues."""
    per_queue: dict[int, list[int]] = defaultdict(list)
    for event in events:
        queue_id, offset = where[event["message_id"]]
        # The client's process queue is the message's queue: the server hands out the
        # queue a ReceiveMessage names, no other.
        assert (event["queue"], event["offset"]) == (queue_id, offset), event
        per_queue[queue_id].append(offset)
    assert all(offsets == sorted(offsets) for offsets in per_queue.values()), per_queue
    return set(per_queue)


class Pair:
    """The group's two push consumers and their stop files."""

    def __init__(self, root: Path, address: str) -> None:
        self.stops = [root / "stop-a", root / "stop-b"]
        credentials = (READER, sha256_hex(READER_TOKEN))
        self.peers = [
            JavaPeer(root / name, "push", address, TOPIC, GROUP, str(stop), "600", *credentials)
            for name, stop in zip(("a", "b"), self.stops, strict=True)
        ]


@pytest.fixture(scope="module")
def pair(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """Two push consumers of GROUP, each with its share of the queues: markers are committed
    until each has consumed one (a new group reads from its start on, and a consumer gets
    messages only once the group dealt it queues)."""
    made = Pair(tmp_path_factory.mktemp("push-peers"), stack.address)
    try:
        for peer in made.peers:
            assert peer.wait_for("ready", TIMEOUT), peer.tail()
        try:
            markers_until(
                stack.producer,
                lambda m: any(e["message_id"] == m for p in made.peers for e in p.of("received")),
                lambda: all(received(peer, "marker-") for peer in made.peers),
                "each push consumer consumed a marker",
            )
        except AssertionError:
            pytest.fail("\n---\n".join(p.tail() for p in made.peers))
        yield made
    finally:
        for stop in made.stops:
            stop.touch()
        for peer in made.peers:
            peer.finish(60)


def test_two_push_consumers_split_the_queues_and_consume_each_message_once(
    stack: Stack, pair: Pair
) -> None:
    ids = commit(stack.producer, [f"split-{i}" for i in range(SPLIT)])
    wait_until(
        lambda: {e["message_id"] for p in pair.peers for e in received(p, "split-")} >= set(ids),
        f"all {SPLIT} messages consumed",
        *pair.peers,
    )
    where = positions(stack.config)
    a, b = (received(peer, "split-") for peer in pair.peers)
    counted = Counter(e["message_id"] for e in a + b)
    assert counted == Counter(ids), counted  # each exactly once, across the two
    queues_a, queues_b = check_queues(a, where), check_queues(b, where)
    assert queues_a and queues_b and not queues_a & queues_b, (queues_a, queues_b)
    assert queues_a | queues_b == set(range(QUEUES)), (queues_a, queues_b)


def test_a_consumer_that_shuts_down_hands_its_queues_to_the_other(stack: Stack, pair: Pair) -> None:
    stayer, leaver = pair.peers
    pair.stops[1].touch()  # it closes: NotifyClientTermination, its member leaves the group
    assert leaver.wait_for("closed", TIMEOUT), leaver.tail()
    assert leaver.finish(60) == 0, leaver.tail()
    # From here on the clock of the hand-over runs (HAND_OVER_TIMEOUT).
    ids = commit(stack.producer, [f"after-{i}" for i in range(AFTER)])
    wait_until(
        lambda: {e["message_id"] for e in received(stayer, "after-")} >= set(ids),
        f"all {AFTER} later messages consumed by the one left",
        stayer,
        leaver,
        timeout=HAND_OVER_TIMEOUT,
    )
    after = received(stayer, "after-")
    assert Counter(e["message_id"] for e in after) == Counter(ids)
    assert not received(leaver, "after-")
    where = positions(stack.config)
    queues = check_queues(after, where)
    assert queues == {where[i][0] for i in ids}
    # The leaver's queues are the stayer's now.
    assert {where[e["message_id"]][0] for e in received(leaver, "split-")} <= queues, queues
    # Nothing the two consumed earlier came again (to the one left, on its new queues).
    everything = Counter(e["message_id"] for p in pair.peers for e in p.of("received"))
    assert max(everything.values()) == 1, {k: n for k, n in everything.items() if n > 1}


class Listener(MessageListener):  # type: ignore[misc]
    """Consumes every message (its id and attempt recorded); fails `py-retry` once."""

    def __init__(self) -> None:
        self.consumed: list[tuple[str, str, int]] = []  # (key, message id, attempt)
        self._lock = threading.Lock()

    def consume(self, message: Message) -> Any:
        (key,) = message.keys
        with self._lock:
            self.consumed.append((key, message.message_id, message.delivery_attempt))
        if key == "py-retry" and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS

    def ids(self, prefix: str) -> list[str]:
        with self._lock:
            return [i for key, i, _ in self.consumed if key.startswith(prefix)]


def test_the_python_client_s_push_consumer_consumes_once_in_order_and_retries_a_failure(
    stack: Stack,
) -> None:
    listener = Listener()
    configuration = client_configuration(stack.address, READER, sha256_hex(READER_TOKEN))
    consumer = PushConsumer(
        configuration, PY_GROUP, listener, {TOPIC: FilterExpression()}, consumption_thread_count=1
    )
    consumer.startup()
    try:
        markers_until(
            stack.producer,
            lambda m: m in listener.ids("pymark-"),
            lambda: bool(listener.ids("pymark-")),  # its group begins once it has its queues
            "the Python push consumer consumed a marker",
            prefix="pymark-",
        )
        ids = commit(stack.producer, [f"py-{i}" for i in range(12)])
        (retried,) = commit(stack.producer, ["py-retry"])
        wait_until(
            lambda: (
                set(listener.ids("py-")) >= {*ids, retried}
                and listener.ids("py-retry").count(retried) >= 2
            ),
            "every message consumed by the Python push consumer, the failed one twice",
        )
    finally:
        consumer.shutdown()
    assert Counter(listener.ids("py-")) == Counter({*ids, retried}) + Counter([retried])
    attempts = [attempt for key, _, attempt in listener.consumed if key == "py-retry"]
    assert attempts == [1, 2], attempts
    where = positions(stack.config)
    per_queue: dict[int, list[int]] = defaultdict(list)
    for message_id in listener.ids("py-"):
        if message_id in ids:
            queue_id, offset = where[message_id]
            per_queue[queue_id].append(offset)
    assert all(offsets == sorted(offsets) for offsets in per_queue.values()), per_queue
