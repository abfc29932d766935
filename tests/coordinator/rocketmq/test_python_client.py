"""The official RocketMQ Python client against txcoord, unchanged but for its endpoint
(docs/rocketmq.md). Its transactional producer: commit, rollback, check-backs answered by its
TransactionChecker (the sender's first, another producer's when the sender is gone), a
producer that never answers, duplicate ends, and the refusals (wrong signature, oversized
body, unknown topic, other message types), each with its RocketMQ Code. Its SimpleConsumer:
committed messages received in queue order and acked, redelivered after their invisible
duration, a changed invisible duration. And a second endpoint process killed -9 mid-flow and
restarted on its port: nothing acknowledged lost, nothing doubled.

One engine (this process's Spark), one endpoint process (`python -m coordinator.rocketmq`)
and one producer serve the whole module. The check-backs' transactions are all sent by the
module's fixture at once, so their checks run side by side while the other tests run.
"""

from __future__ import annotations

import re
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
from rocketmq.grpc_protocol import Code, MessageType, TransactionResolution
from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.v5.consumer import SimpleConsumer
from rocketmq.v5.exception import BadRequestException
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer, TransactionChecker

from coordinator.core.config import Config, load_config
from coordinator.rest.auth import sha256_hex
from coordinator.runtime.local_stack.ports import free_port
from tests.conftest import settings_under
from tests.coordinator.rocketmq.endpoint_process import (
    RawClient,
    client_configuration,
    endpoint_process,
    start_endpoint,
    stop_endpoint,
)
from tests.coordinator.rocketmq.java_peer import JavaPeer
from tests.harness import Engine, wait_for

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.long,
    # The client's own logging calls logger.warn.
    pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning"),
]

TOPIC = "Orders"
#: The topic of the README's example.
README_TOPIC = "OrderPaid"
#: The topic the SimpleConsumer reads (no other test sends to it).
CONSUMED_TOPIC = "Billing"
GROUP = "orders"
#: The producer's credentials: the auth file's token named ACCESS_KEY, whose sha256 is the
#: secret key (coordinator/rocketmq/credentials.py).
ACCESS_KEY = "orders-app"
TOKEN = "orders-app-token-0123456789abcdef"
SECRET_KEY = sha256_hex(TOKEN)
CONSUMER_TOKEN = "billing-reader-token-0123456789"
#: A token of another producer group, for the producer of the killed endpoint: a second
#: endpoint process polls the checks of the groups of its streams, `payments` only.
PAYMENTS_TOKEN = "payments-app-token-0123456789abc"
#: RocketMQ's Java client (tests/coordinator/rocketmq/java_peer.py): its own producer group
#: and consumer group, so that no check of its halves can reach the Python producers.
JAVA_TOPIC = "JavaOrders"
JAVA_ACCESS_KEY = "java-app"
JAVA_TOKEN = "java-app-token-0123456789abcdef01"
JAVA_READER = "java-reader"
JAVA_READER_TOKEN = "java-reader-token-0123456789abcd"
JAVA_CONSUMER_GROUP = "java-readers"
MAX_MESSAGE_SIZE = 64 * 1024
#: Seconds to wait for a transaction's end: checks come every few seconds (the config below),
#: on a loaded machine batches take seconds.
END_TIMEOUT = 150
#: how long the killed endpoint's client waits after a failed call before the next: an
#: application backs off, and a busy loop would fill the client's log and take a core.
RETRY_PAUSE = 0.05

#: What the checker answers, by the message's key: at each check number in turn (the last
#: again after that); None raises, so the client sends no answer at all.
PLANS: dict[str, list[Any]] = {
    "check-commit": [TransactionResolution.COMMIT],
    "check-rollback": [TransactionResolution.ROLLBACK],
    "unknown-then-commit": [
        TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED,
        TransactionResolution.COMMIT,
    ],
    "never": [None],
    "gone-sender": [TransactionResolution.COMMIT],
}
#: The plans of the transactions the module's producer sends (not the gone one's).
SENT_BY_PRODUCER = ("check-commit", "check-rollback", "unknown-then-commit", "never")


class PlannedChecker(TransactionChecker):  # type: ignore[misc]
    """Answers each check as PLANS says; remembers every check it was asked."""

    def __init__(self) -> None:
        self.asked: dict[str, list[int]] = defaultdict(list)  # key -> delivery attempts
        self._lock = threading.Lock()

    def check(self, message: Message) -> Any:
        (key,) = message.keys
        with self._lock:
            self.asked[key].append(message.delivery_attempt)  # the check's number
        plan = PLANS[key]
        answer = plan[min(message.delivery_attempt, len(plan)) - 1]
        if answer is None:
            raise RuntimeError("this producer never answers")
        return answer


def write_auth_file(path: Path) -> Path:
    path.write_text(
        f'[[token]]\nname = "{ACCESS_KEY}"\ngroup = "{GROUP}"\nsha256 = "{SECRET_KEY}"\n\n'
        f'[[token]]\nname = "payments-app"\ngroup = "payments"\n'
        f'sha256 = "{sha256_hex(PAYMENTS_TOKEN)}"\n\n'
        f'[[token]]\nname = "billing"\nsha256 = "{sha256_hex(CONSUMER_TOKEN)}"\n'
        '[[token.consume]]\ngroup = "billing"\ntopics = ["*"]\n\n'
        f'[[token]]\nname = "{JAVA_ACCESS_KEY}"\ngroup = "java-orders"\n'
        f'sha256 = "{sha256_hex(JAVA_TOKEN)}"\n\n'
        f'[[token]]\nname = "{JAVA_READER}"\nsha256 = "{sha256_hex(JAVA_READER_TOKEN)}"\n'
        f'[[token.consume]]\ngroup = "{JAVA_CONSUMER_GROUP}"\ntopics = ["{JAVA_TOPIC}"]\n'
    )
    path.chmod(0o600)
    return path


class Stack:
    """The module's engine, endpoint and producer."""

    def __init__(self, config: Config, address: str, producer: Producer, checker: Any) -> None:
        self.config, self.address, self.producer, self.checker = config, address, producer, checker
        #: The endpoint's settings (--set), for another endpoint process of the same stack.
        self.settings: dict[str, str] = {}
        #: The check-backs' transactions: plan -> transaction id (the client's message id).
        self.checked: dict[str, str] = {}
        #: The checker of another producer of the group, which sends nothing itself.
        self.idle_checker = PlannedChecker()


@pytest.fixture(scope="module")
def stack(
    spark: SparkSession, bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("rocketmq")
    settings = settings_under(
        root,
        bootstrap_servers,
        transaction_timeout="3s",
        transaction_check_interval="4s",
        transaction_check_max="2",
        auto_create_topic_enable="false",
        topics=f"{TOPIC},{README_TOPIC},{CONSUMED_TOPIC},{JAVA_TOPIC}",
        max_message_size=str(MAX_MESSAGE_SIZE),
        **{
            "rest.auth_file": str(write_auth_file(root / "auth.toml")),
            # Long enough that a loaded machine's sender takes its checks first.
            "grpc.check_sender_first": "5s",
        },
    )
    config = load_config(overrides=settings)
    engine = Engine(spark, config)
    try:
        with endpoint_process(settings) as address:
            checker = PlannedChecker()
            producer = Producer(
                client_configuration(address, ACCESS_KEY, SECRET_KEY), (TOPIC,), checker
            )
            producer.startup()
            running = Stack(config, address, producer, checker)
            running.settings = settings
            credentials = client_configuration(address, ACCESS_KEY, SECRET_KEY)
            idle = Producer(credentials, (TOPIC,), running.idle_checker)
            idle.startup()
            try:
                # A producer that sends a half and is gone before its check comes.
                gone = Producer(credentials, (TOPIC,), PlannedChecker())
                gone.startup()
                running.checked["gone-sender"] = send_half(gone, "gone-sender")[0]
                gone.shutdown()
                for plan in SENT_BY_PRODUCER:  # their checks run while the other tests do
                    running.checked[plan] = send_half(producer, plan)[0]
                yield running
            finally:
                idle.shutdown()
                producer.shutdown()
    finally:
        engine.stop()


def send_half(
    producer: Producer, key: str, topic: str = TOPIC, tag: str = "TagA"
) -> tuple[str, Any]:
    """Send one half with key `key`; return its transaction id and its transaction."""
    transaction = producer.begin_transaction()
    message = Message()
    message.topic = topic
    message.body = f"body of {key}".encode()
    message.tag = tag
    message.keys = key
    message.add_property("order", key)
    receipt = producer.send(message, transaction)
    assert receipt.transaction_id == receipt.message_id == message.message_id
    return receipt.transaction_id, transaction


def rows_of(config: Config, name: str, transaction_id: str | None = None) -> list[Any]:
    """Return the rows of warehouse table `name` (of one transaction), read with delta-rs:
    no Spark job beside the engine's batches on the test's cores."""
    try:
        found = DeltaTable(f"{config.warehouse}/{name}")
    except TableNotFoundError:
        return []
    wanted = None if transaction_id is None else [("transaction_id", "=", transaction_id)]
    return [SimpleNamespace(**row) for row in found.to_pyarrow_table(filters=wanted).to_pylist()]


def final(spark: SparkSession, config: Config, transaction_id: str) -> tuple[str, str] | None:
    rows = rows_of(config, "system/transactions", transaction_id)
    return (rows[-1].state, rows[-1].reason) if rows else None


def wait_for_end(spark: SparkSession, config: Config, transaction_id: str) -> tuple[str, str]:
    wait_for(
        lambda: final(spark, config, transaction_id) is not None,
        END_TIMEOUT,
        f"transaction {transaction_id} to end",
    )
    ended = final(spark, config, transaction_id)
    assert ended is not None
    return ended


def delivered(spark: SparkSession, config: Config, transaction_id: str) -> list[Any]:
    return rows_of(config, f"topics/{TOPIC}", transaction_id)


def test_a_committed_transaction_is_delivered_once_with_its_message(
    spark: SparkSession, stack: Stack
) -> None:
    transaction_id, transaction = send_half(stack.producer, "commit")
    transaction.commit()
    assert wait_for_end(spark, stack.config, transaction_id) == ("COMMITTED", "op")
    (row,) = delivered(spark, stack.config, transaction_id)
    assert (row.producer_group, bytes(row.body), row.tags) == (GROUP, b"body of commit", "TagA")
    assert list(row.keys) == ["commit"]
    properties = dict(row.properties)
    assert properties["order"] == "commit"
    assert properties["txcoord.born_host"]  # the client's address
    assert abs(int(properties["txcoord.born_timestamp"]) / 1000 - time.time()) < 600


def test_a_rolled_back_transaction_is_never_delivered(spark: SparkSession, stack: Stack) -> None:
    transaction_id, transaction = send_half(stack.producer, "rollback")
    transaction.rollback()
    assert wait_for_end(spark, stack.config, transaction_id) == ("ROLLED_BACK", "op")
    assert delivered(spark, stack.config, transaction_id) == []


def test_a_check_answered_commit_by_the_checker_commits(spark: SparkSession, stack: Stack) -> None:
    transaction_id = stack.checked["check-commit"]
    assert wait_for_end(spark, stack.config, transaction_id) == ("COMMITTED", "check")
    assert len(delivered(spark, stack.config, transaction_id)) == 1
    assert stack.checker.asked["check-commit"][0] == 1  # the first check, numbered


def test_a_check_answered_rollback_by_the_checker_rolls_back(
    spark: SparkSession, stack: Stack
) -> None:
    transaction_id = stack.checked["check-rollback"]
    assert wait_for_end(spark, stack.config, transaction_id) == ("ROLLED_BACK", "check")
    assert delivered(spark, stack.config, transaction_id) == []


def test_unknown_at_the_first_check_then_commit_at_the_second(
    spark: SparkSession, stack: Stack
) -> None:
    transaction_id = stack.checked["unknown-then-commit"]
    assert wait_for_end(spark, stack.config, transaction_id) == ("COMMITTED", "check")
    # Check numbers, each once (a check may come twice: answered alike, contract 5.2).
    assert list(dict.fromkeys(stack.checker.asked["unknown-then-commit"]))[:2] == [1, 2]
    verdicts = Counter(
        (r.op, r.verdict) for r in rows_of(stack.config, "system/op_verdicts", transaction_id)
    )
    assert verdicts[("UNKNOWN", "NO_EFFECT")] >= 1, verdicts
    assert verdicts[("COMMIT", "APPLIED")] == 1, verdicts


def test_a_producer_that_never_answers_is_discarded_after_check_max(
    spark: SparkSession, stack: Stack
) -> None:
    transaction_id = stack.checked["never"]
    assert wait_for_end(spark, stack.config, transaction_id) == ("DISCARDED", "check_max")
    asked = list(dict.fromkeys(stack.checker.asked["never"]))
    assert asked == [1, 2]  # transaction_check_max = 2, then no more
    assert delivered(spark, stack.config, transaction_id) == []


def test_a_check_goes_to_the_producer_that_sent_the_half(spark: SparkSession, stack: Stack) -> None:
    for plan in SENT_BY_PRODUCER:
        wait_for_end(spark, stack.config, stack.checked[plan])
        assert stack.checker.asked[plan], plan
    # Another live producer of the group was never asked the sender's checks.
    assert not set(stack.idle_checker.asked) & set(SENT_BY_PRODUCER), stack.idle_checker.asked


def test_a_gone_sender_s_check_goes_to_another_producer_of_the_group(
    spark: SparkSession, stack: Stack
) -> None:
    transaction_id = stack.checked["gone-sender"]
    assert wait_for_end(spark, stack.config, transaction_id) == ("COMMITTED", "check")
    # Its first check reached a live producer (so may its second: the sender is waited for
    # longer than a check interval here).
    asked = stack.checker.asked["gone-sender"] + stack.idle_checker.asked["gone-sender"]
    assert 1 in asked, asked


def test_duplicate_and_conflicting_ends_change_nothing(spark: SparkSession, stack: Stack) -> None:
    transaction_id, transaction = send_half(stack.producer, "duplicate")
    transaction.commit()
    # The client ends a transaction once; the protocol allows more: each is answered OK.
    raw = RawClient(stack.address, ACCESS_KEY, SECRET_KEY)
    try:
        for resolution in (TransactionResolution.COMMIT, TransactionResolution.ROLLBACK):
            request = service.EndTransactionRequest(
                transaction_id=transaction_id, message_id=transaction_id, resolution=resolution
            )
            request.topic.name = TOPIC
            assert raw.call("EndTransaction", request).status.code == Code.OK
    finally:
        raw.close()
    assert wait_for_end(spark, stack.config, transaction_id) == ("COMMITTED", "op")
    wait_for(
        lambda: len(rows_of(stack.config, "system/op_verdicts", transaction_id)) >= 3,
        END_TIMEOUT,
        "every op's verdict",
    )
    verdicts = sorted(
        r.verdict for r in rows_of(stack.config, "system/op_verdicts", transaction_id)
    )
    assert verdicts == ["APPLIED", "CONFLICT", "DUPLICATE"]
    assert len(delivered(spark, stack.config, transaction_id)) == 1


def half(topic: str, body: bytes, message_type: int = MessageType.TRANSACTION) -> Any:
    request = service.SendMessageRequest()
    message = request.messages.add()
    message.topic.name = topic
    message.body = body
    message.system_properties.message_id = f"raw-{time.monotonic_ns()}"
    message.system_properties.message_type = message_type
    message.system_properties.keys.append("never")  # a check of it is never answered
    return request


def test_a_wrong_signature_is_unauthorized(stack: Stack, caplog: pytest.LogCaptureFixture) -> None:
    raw = RawClient(stack.address, ACCESS_KEY, sha256_hex("not the token"))
    try:
        assert raw.call("SendMessage", half(TOPIC, b"x")).status.code == Code.UNAUTHORIZED
    finally:
        raw.close()
    # The official client gets no route, says why in its log, and sends nothing.
    wrong = Producer(client_configuration(stack.address, ACCESS_KEY, "0" * 64), (TOPIC,), None)
    wrong.startup()
    try:
        message = Message()
        message.topic, message.body = TOPIC, b"x"
        with pytest.raises(Exception, match=f"failed to fetch topic:{TOPIC} route"):
            wrong.send(message)
    finally:
        wrong.shutdown()
    assert f"{Code.UNAUTHORIZED}, the signature of access key '{ACCESS_KEY}'" in caplog.text


def receive_status(client: RawClient, request: Any) -> int:
    """Return the final status code of a ReceiveMessage stream."""
    *_, final_answer = client.stub.ReceiveMessage(request, metadata=client.metadata(), timeout=30)
    return int(final_answer.status.code)


def test_refusals_carry_their_code_and_the_endpoint_goes_on(
    stack: Stack, caplog: pytest.LogCaptureFixture
) -> None:
    raw = RawClient(stack.address, ACCESS_KEY, SECRET_KEY)
    consumer_only = RawClient(stack.address, "billing", sha256_hex(CONSUMER_TOKEN))
    try:
        too_large = raw.call("SendMessage", half(TOPIC, b"x" * (MAX_MESSAGE_SIZE + 1)))
        assert too_large.status.code == Code.MESSAGE_BODY_TOO_LARGE
        unknown = raw.call("SendMessage", half("Unknown", b"x"))
        assert unknown.status.code == Code.TOPIC_NOT_FOUND
        route = service.QueryRouteRequest()
        route.topic.name = "Unknown"
        assert raw.call("QueryRoute", route).status.code == Code.TOPIC_NOT_FOUND
        normal = raw.call("SendMessage", half(TOPIC, b"x", MessageType.NORMAL))
        assert normal.status.code == Code.UNSUPPORTED
        bad_name = raw.call("SendMessage", half("bad/name", b"x"))
        assert bad_name.status.code == Code.ILLEGAL_TOPIC
        forbidden = consumer_only.call("SendMessage", half(TOPIC, b"x"))
        assert forbidden.status.code == Code.FORBIDDEN
        bad_id = service.EndTransactionRequest(transaction_id="", resolution=1)
        bad_id.topic.name = TOPIC
        assert raw.call("EndTransaction", bad_id).status.code == Code.INVALID_TRANSACTION_ID
        # A push consumer's QueryAssignment is served (and checked); there is no DLQ.
        assert (
            raw.call("QueryAssignment", service.QueryAssignmentRequest()).status.code
            == Code.ILLEGAL_TOPIC
        )
        assert (
            raw.call(
                "ForwardMessageToDeadLetterQueue", service.ForwardMessageToDeadLetterQueueRequest()
            ).status.code
            == Code.NOT_IMPLEMENTED
        )
        (received,) = list(
            raw.stub.ReceiveMessage(service.ReceiveMessageRequest(), metadata=raw.metadata())
        )
        assert received.status.code == Code.ILLEGAL_TOPIC
        # A SimpleConsumer's calls, refused before anything is read.
        receive = service.ReceiveMessageRequest(batch_size=1)
        receive.group.name, receive.message_queue.topic.name = "billing", CONSUMED_TOPIC
        receive.invisible_duration.FromMilliseconds(100)  # under a second
        assert receive_status(consumer_only, receive) == Code.ILLEGAL_INVISIBLE_TIME
        receive.invisible_duration.FromSeconds(30)
        receive.filter_expression.type, receive.filter_expression.expression = 2, "a > 1"
        assert receive_status(consumer_only, receive) == Code.UNSUPPORTED  # SQL92
        receive.ClearField("filter_expression")
        receive.group.name = "not-granted"
        assert receive_status(consumer_only, receive) == Code.FORBIDDEN
        assert receive_status(raw, receive) == Code.FORBIDDEN  # a producer token consumes not
        for name in ("%2e%2e", "a/b", "x y", ""):  # the REST ingress's rule for the group
            receive.group.name = name
            assert receive_status(consumer_only, receive) == Code.ILLEGAL_CONSUMER_GROUP, name
        ack = service.AckMessageRequest()
        ack.group.name, ack.topic.name = "billing", CONSUMED_TOPIC
        ack.entries.add(message_id="m", receipt_handle="not a receipt")
        assert consumer_only.call("AckMessage", ack).status.code == Code.INVALID_RECEIPT_HANDLE
        # ... and a good half still goes through.
        assert raw.call("SendMessage", half(TOPIC, b"fine")).status.code == Code.OK
    finally:
        raw.close()
        consumer_only.close()
    # The official client refuses a topic the endpoint does not have.
    message = Message()
    message.topic, message.body = "Unknown", b"x"
    with pytest.raises(Exception, match="failed to fetch topic:Unknown route"):
        stack.producer.send(message, stack.producer.begin_transaction())
    assert f"{Code.TOPIC_NOT_FOUND}, topic 'Unknown' is not one of the configured" in caplog.text


def readme_rocketmq_example() -> str:
    """Return the README's RocketMQ client example (the block that builds a Producer)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    (example,) = [str(block) for block in blocks if "ClientConfiguration(" in block]
    return example


def test_the_readme_s_rocketmq_example_commits(spark: SparkSession, stack: Stack) -> None:
    example = readme_rocketmq_example()
    assert '"127.0.0.1:8081"' in example and f'"{ACCESS_KEY}"' in example
    names: dict[str, Any] = {"token_sha256": SECRET_KEY, "checker": PlannedChecker()}
    exec(example.replace("127.0.0.1:8081", stack.address), names)
    producer = names["producer"]
    producer.startup()
    try:
        transaction = producer.begin_transaction()
        message = Message()
        message.topic, message.body = README_TOPIC, b"paid"
        receipt = producer.send(message, transaction)
        transaction.commit()
    finally:
        producer.shutdown()
    ended = wait_for_end(spark, stack.config, receipt.transaction_id)
    assert ended == ("COMMITTED", "op")


CONSUMER_GROUP = "billing"


def commit(producer: Producer, keys: list[str], tag: str = "TagA") -> list[str]:
    """Send and commit one transaction per key on CONSUMED_TOPIC; return their ids."""
    ids = []
    for key in keys:
        transaction_id, transaction = send_half(producer, key, CONSUMED_TOPIC, tag)
        transaction.commit()
        ids.append(transaction_id)
    return ids


def receive_until(
    consumer: SimpleConsumer, wanted: set[str], invisible: int, timeout: float = END_TIMEOUT
) -> list[Message]:
    """Receive until every message id of `wanted` came; return everything received."""
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while not wanted <= {m.message_id for m in got}:
        assert time.monotonic() < deadline, f"never received {wanted - {m.message_id for m in got}}"
        got += consumer.receive(16, invisible)
    return got


@pytest.fixture(scope="module")
def consumer(stack: Stack) -> Iterator[SimpleConsumer]:
    """A SimpleConsumer of group `billing` on CONSUMED_TOPIC (TagA), in its group: a new
    group starts at the end, so it has received a message committed after it joined."""
    secret = sha256_hex(CONSUMER_TOKEN)
    made = SimpleConsumer(
        client_configuration(stack.address, "billing", secret),
        CONSUMER_GROUP,
        {CONSUMED_TOPIC: FilterExpression("TagA")},
        await_duration=2,
    )
    made.startup()
    try:
        deadline = time.monotonic() + END_TIMEOUT
        joined: list[Message] = []
        while not joined:  # until a marker committed after the join comes
            assert time.monotonic() < deadline, "the consumer never received its first message"
            commit(stack.producer, [f"marker-{time.monotonic_ns()}"])
            joined = made.receive(16, 30)
        for message in joined:
            made.ack(message)
        yield made
    finally:
        made.shutdown()


def queue_positions(
    spark: SparkSession, config: Config, ids: list[str]
) -> dict[str, tuple[int, int]]:
    rows = rows_of(config, f"topics/{CONSUMED_TOPIC}")
    return {r.transaction_id: (r.queue_id, r.queue_offset) for r in rows if r.transaction_id in ids}


def test_a_simple_consumer_receives_committed_messages_in_queue_order(
    spark: SparkSession, stack: Stack, consumer: SimpleConsumer
) -> None:
    ids = commit(stack.producer, [f"billed-{i}" for i in range(8)])
    filtered = commit(stack.producer, ["other-tag"], tag="TagB")
    got = receive_until(consumer, set(ids), invisible=30)
    for message in got:
        consumer.ack(message)
    assert not set(filtered) & {m.message_id for m in got}  # TagB is not subscribed
    # Nothing else but the fixture's later markers (it commits one until one comes back).
    others = [m.keys for m in got if m.message_id not in ids]
    assert all(len(keys) == 1 and next(iter(keys)).startswith("marker-") for keys in others)
    got = [m for m in got if m.message_id in ids]
    by_id = {m.message_id: m for m in got}
    assert by_id[ids[0]].body == b"body of billed-0" and by_id[ids[0]].tag == "TagA"
    assert by_id[ids[0]].keys == {"billed-0"} and by_id[ids[0]].properties == {"order": "billed-0"}
    # Each queue's messages came in queue-offset order (the topic table says where each is).
    positions = queue_positions(spark, stack.config, ids)
    per_queue: dict[int, list[int]] = defaultdict(list)
    for message in got:
        queue_id, offset = positions[message.message_id]
        per_queue[queue_id].append(offset)
    assert all(offsets == sorted(offsets) for offsets in per_queue.values()), per_queue
    assert len(per_queue) > 1  # spread over the topic's queues


def test_a_message_not_acked_comes_again_after_its_invisible_duration(
    stack: Stack, consumer: SimpleConsumer
) -> None:
    (again,) = commit(stack.producer, ["again"])
    (first,) = [m for m in receive_until(consumer, {again}, invisible=2) if m.message_id == again]
    handed_out = time.monotonic()
    (second,) = [m for m in receive_until(consumer, {again}, invisible=30) if m.message_id == again]
    assert time.monotonic() - handed_out >= 1.5  # never before its invisible duration
    assert (first.delivery_attempt, second.delivery_attempt) == (1, 2)
    with pytest.raises(BadRequestException):  # only the latest delivery's receipt counts
        consumer.ack(first)
    consumer.ack(second)


def test_a_changed_invisible_duration_brings_a_message_back_sooner(
    stack: Stack, consumer: SimpleConsumer
) -> None:
    (sooner,) = commit(stack.producer, ["sooner"])
    (first,) = [
        m for m in receive_until(consumer, {sooner}, invisible=300) if m.message_id == sooner
    ]
    consumer.change_invisible_duration(first, 1)
    (second,) = [
        m
        for m in receive_until(consumer, {sooner}, invisible=30, timeout=60)
        if m.message_id == sooner
    ]
    assert second.delivery_attempt == 2
    consumer.ack(second)


class Ledger(TransactionChecker):  # type: ignore[misc]
    """The application's own record of its local transactions: a check is answered from it."""

    def __init__(self) -> None:
        self.committed: set[str] = set()

    def check(self, message: Message) -> Any:
        if message.message_id in self.committed:
            return TransactionResolution.COMMIT
        return TransactionResolution.ROLLBACK


def test_a_killed_endpoint_loses_nothing_acknowledged_and_doubles_nothing(
    spark: SparkSession, stack: Stack
) -> None:
    """kill -9 of the endpoint mid-flow, restarted on its port: every commit it acknowledged
    is delivered once, nothing is delivered twice or without the application's commit."""
    port = free_port()
    endpoint, address = start_endpoint(stack.settings, port)
    ledger = Ledger()
    acknowledged: list[str] = []
    stop = threading.Event()
    producer = Producer(
        client_configuration(address, "payments-app", sha256_hex(PAYMENTS_TOKEN)),
        (TOPIC,),
        ledger,
    )
    producer.startup()

    def traffic() -> None:
        # Until the test ends, not a number of tries: while the endpoint is down a send fails
        # at once, and a loaded host's restart took long enough for 10,000 failures in a row.
        i = 0
        while not stop.is_set():
            i += 1
            try:
                transaction_id, transaction = send_half(producer, f"kill-{i}")
            except Exception:  # not stored, or not known to be: the application moves on
                stop.wait(RETRY_PAUSE)
                continue
            ledger.committed.add(transaction_id)  # its local transaction committed
            try:
                transaction.commit()
                acknowledged.append(transaction_id)
            except Exception:  # the endpoint is down: the commit is not acknowledged
                stop.wait(RETRY_PAUSE)

    sender = threading.Thread(target=traffic, name="traffic", daemon=True)
    sender.start()
    try:
        wait_for(lambda: len(acknowledged) >= 5, END_TIMEOUT, "commits before the kill")
        endpoint.kill9()
        before = len(acknowledged)
        endpoint, _ = start_endpoint(stack.settings, port)  # the clients' address again
        wait_for(lambda: len(acknowledged) >= before + 5, END_TIMEOUT, "commits after it")
    finally:
        stop.set()
        sender.join(60)
        producer.shutdown()
        stop_endpoint(endpoint)

    def payments() -> Counter[str]:
        rows = rows_of(stack.config, f"topics/{TOPIC}")
        return Counter(r.transaction_id for r in rows if r.producer_group == "payments")

    wait_for(lambda: set(acknowledged) <= set(payments()), END_TIMEOUT, "every acknowledged commit")
    delivered_now = payments()
    assert max(delivered_now.values()) == 1, delivered_now  # nothing doubled
    assert set(delivered_now) <= ledger.committed  # nothing the application did not commit


def test_rocketmq_s_java_client_runs_unchanged(
    spark: SparkSession, stack: Stack, tmp_path: Path
) -> None:
    """RocketMQ's official Java client (Maven Central, deploy/jvm/rocketmq-peer/), with only
    the endpoint and the credentials changed: 8 transactions committed, rolled back, left to
    its TransactionChecker (COMMIT at the first check; UNKNOWN at the first, COMMIT at a later
    one); its SimpleConsumer, started before, receives the 6 committed once each, and no
    rolled back one."""
    reader = JavaPeer(
        tmp_path / "consumer", "consume", stack.address, JAVA_TOPIC, JAVA_CONSUMER_GROUP, "6",
        "240", JAVA_READER, sha256_hex(JAVA_READER_TOKEN),
    )  # fmt: skip
    try:
        assert reader.wait_for("ready", 120), reader.tail()
        producer = JavaPeer(
            tmp_path / "producer", "produce", stack.address, JAVA_TOPIC, "8",
            JAVA_ACCESS_KEY, sha256_hex(JAVA_TOKEN),
        )  # fmt: skip
        assert producer.finish(300) == 0, producer.tail()
    finally:
        reader_code = reader.finish(300)
    sent = {e["key"]: e for e in producer.of("sent")}
    assert [sent[f"jk-{i}"]["action"] for i in range(8)] == [
        "commit",
        "rollback",
        "open",
        "open",
    ] * 2
    asked = Counter(e["key"] for e in producer.of("check"))
    assert {k for k, e in sent.items() if e["action"] == "open"} <= set(asked), asked
    assert all(asked[f"jk-{i}"] >= 2 for i in (3, 7)), asked  # UNKNOWN, then asked again
    assert reader_code == 0, reader.tail()
    received = Counter(e["key"] for e in reader.of("received"))
    assert received == Counter(["jk-0", "jk-2", "jk-3", "jk-4", "jk-6", "jk-7"]), received
    # The transaction ids are the client's message ids; each transaction ended as planned.
    ends = {key: wait_for_end(spark, stack.config, e["message_id"]) for key, e in sent.items()}
    rolled_back = {key for key, (state, _) in ends.items() if state == "ROLLED_BACK"}
    assert rolled_back == {"jk-1", "jk-5"}, ends
