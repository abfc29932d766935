"""The SDK over the real Kafka broker: ingress records written, check requests answered."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from coordinator.protocol import ingress as fmt
from coordinator.protocol.ingress import msg_id_of, op_id_of
from coordinator.sdk import (
    CheckRequest,
    LocalTransactionState,
    Message,
    OpReceipt,
    TransactionProducer,
    TransportError,
)
from coordinator.sdk.kafka_transport import KafkaTransport
from streams.query.batch_writer import check_record

from .conftest import (
    ProducerFactory,
    SdkTopics,
    committed_offsets,
    end_offsets,
    group_members,
    publish,
    read_records,
)
from .helpers import RecordingListener, State, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.long]

LOG_APPEND_TIME = 1


def check_of(transaction_id: str, group: str, check_number: int = 1) -> tuple[bytes, bytes, Any]:
    """Return the check-topic record the coordinator writes (streams/query/batch_writer.py)."""
    row = {
        "transaction_id": transaction_id, "msg_id": "0000000000000000002A",
        "producer_group": group, "topic": "OrderPaid", "queue_id": 1, "body": b"\x00paid",
        "keys": ["o-1"], "tags": "paid", "properties": {"region": "eu"},
        "check_number": check_number, "prepared_ms": 1_700_000_000_000,
        "at_ms": 1_700_000_006_000,
    }  # fmt: skip
    return check_record(row)


def headers_of(record: Any) -> dict[str, bytes]:
    return dict(record.headers)


def ops_by_transaction(topics: SdkTopics, count: int) -> dict[str, list[dict[str, bytes]]]:
    """Return the op records' headers per transaction id, once `count` ops are there."""
    by_id: dict[str, list[dict[str, bytes]]] = {}
    for record in read_records(topics.bootstrap_servers, topics.op, count):
        by_id.setdefault(record.key.decode(), []).append(headers_of(record))
    return by_id


def test_a_send_writes_the_half_then_the_op_in_the_ingress_format(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    half_count_during_local_transaction: list[int] = []

    class Listener(RecordingListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> State | None:
            halves = read_records(sdk_topics.bootstrap_servers, sdk_topics.half, 1, settle=0)
            half_count_during_local_transaction.append(len(halves))
            return super().execute_local_transaction(msg, arg)

    producer = make_producer(Listener())
    msg = Message(
        topic="OrderPaid",
        body=b"\x00paid",
        keys=["o-1", "o-2"],
        tags="paid",
        properties={"region": "eu"},
        queue_id=3,
        check_immunity_seconds=60,
    )
    before_ms = time.time_ns() // 1_000_000
    result = producer.send_message_in_transaction(msg, arg="order-1")

    assert half_count_during_local_transaction == [1]  # durable before the local transaction
    (half,) = read_records(sdk_topics.bootstrap_servers, sdk_topics.half, 1)
    assert half.key == result.transaction_id.encode()
    assert half.value == b"\x00paid"
    assert half.timestamp_type == LOG_APPEND_TIME
    headers = headers_of(half)
    assert len(headers) == len(half.headers)  # no header twice
    born_at = int(headers.pop(fmt.BORN_AT))
    assert before_ms <= born_at <= time.time_ns() // 1_000_000
    assert headers == {
        fmt.PRODUCER_GROUP: sdk_topics.group.encode(), fmt.TOPIC: b"OrderPaid",
        fmt.QUEUE_ID: b"3", fmt.KEYS: b'["o-1", "o-2"]', fmt.TAGS: b"paid",
        fmt.CHECK_IMMUNITY_SECONDS: b"60", "prop.region": b"eu",
        # The sending instance, to which the half's checks go first.
        f"prop.{fmt.PRODUCER_INSTANCE_PROPERTY}": producer.instance_id.encode(),
    }  # fmt: skip
    assert result.msg_id == msg_id_of(half.partition, half.offset)
    assert (result.partition, result.offset) == (half.partition, half.offset)
    assert int(result.stored_at.timestamp() * 1000) == half.timestamp

    (op,) = read_records(sdk_topics.bootstrap_servers, sdk_topics.op, 1)
    assert op.key == result.transaction_id.encode()
    assert op.value == b""
    op_headers = headers_of(op)
    assert int(op_headers.pop(fmt.BORN_AT)) >= born_at
    assert op_headers == {
        fmt.PRODUCER_GROUP: sdk_topics.group.encode(),
        fmt.OP: b"COMMIT",
        fmt.FROM_CHECK: b"false",
    }
    assert result.op_id == op_id_of(op.partition, op.offset)
    assert op.timestamp >= half.timestamp
    assert result.local_state is LocalTransactionState.COMMIT_MESSAGE


def test_every_local_outcome_becomes_its_op(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    def raises() -> State:
        raise RuntimeError("local database down")

    outcomes: dict[str, tuple[Callable[[], State | None], bytes]] = {
        "commit": (lambda: State.COMMIT_MESSAGE, b"COMMIT"),
        "rollback": (lambda: State.ROLLBACK_MESSAGE, b"ROLLBACK"),
        "unknow": (lambda: State.UNKNOW, b"UNKNOWN"),
        "none": (lambda: None, b"UNKNOWN"),
        "raises": (raises, b"UNKNOWN"),
    }

    class Listener(RecordingListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> State | None:
            return outcomes[arg][0]()

    producer = make_producer(Listener())
    sent = {
        producer.send_message_in_transaction(Message(topic="T"), arg=name).transaction_id: name
        for name in outcomes
    }
    ops = ops_by_transaction(sdk_topics, len(outcomes))
    assert {sent[tx]: [h[fmt.OP] for h in hs] for tx, hs in ops.items()} == {
        name: [op] for name, (_, op) in outcomes.items()
    }


def test_ops_sent_together_are_each_stored_with_their_own_receipt(sdk_topics: SdkTopics) -> None:
    transport = KafkaTransport(
        sdk_topics.bootstrap_servers,
        sdk_topics.group,
        half_topic=sdk_topics.half,
        op_topic=sdk_topics.op,
        check_topic=sdk_topics.check,
    )
    try:
        answers = {f"tx-{i}": ("COMMIT", "ROLLBACK", "UNKNOWN")[i % 3] for i in range(30)}
        receipts = transport.send_ops([(tx, op, True) for tx, op in answers.items()])
    finally:
        transport.close()
    stored = {
        r.key.decode(): r
        for r in read_records(sdk_topics.bootstrap_servers, sdk_topics.op, len(answers))
    }
    assert all(isinstance(receipt, OpReceipt) for receipt in receipts), receipts
    stored_ops = [receipt for receipt in receipts if isinstance(receipt, OpReceipt)]
    assert [receipt.transaction_id for receipt in stored_ops] == list(answers)
    for receipt in stored_ops:
        record = stored[receipt.transaction_id]
        assert receipt.op_id == op_id_of(record.partition, record.offset)
        assert int(receipt.stored_at.timestamp() * 1000) == record.timestamp
        headers = headers_of(record)
        assert (headers[fmt.OP], headers[fmt.FROM_CHECK], headers[fmt.PRODUCER_GROUP]) == (
            answers[receipt.transaction_id].encode(),
            b"true",
            sdk_topics.group.encode(),
        )
        assert receipt.op == answers[receipt.transaction_id]
    assert len(stored) == len(answers)


def test_a_check_request_is_answered_with_a_from_check_op(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    listener = RecordingListener(check=lambda r: State.ROLLBACK_MESSAGE)
    producer = make_producer(listener)
    publish(
        sdk_topics.bootstrap_servers,
        sdk_topics.check,
        [check_of("tx-other", "payments"), check_of("tx-1", sdk_topics.group, 2)],
    )

    ops = ops_by_transaction(sdk_topics, 1)
    (answer,) = ops.pop("tx-1")
    assert ops == {}  # the other group's request is not ours to answer
    assert (answer[fmt.PRODUCER_GROUP], answer[fmt.OP], answer[fmt.FROM_CHECK]) == (
        sdk_topics.group.encode(),
        b"ROLLBACK",
        b"true",
    )
    (request,) = listener.checked
    assert request.message == Message(
        topic="OrderPaid",
        body=b"\x00paid",
        keys=["o-1"],
        tags="paid",
        properties={"region": "eu"},
        queue_id=1,
        transaction_id="tx-1",
        msg_id="0000000000000000002A",
    )
    assert request.check_number == 2
    # Both records (ours and the other group's) are committed once handled.
    ends = end_offsets(sdk_topics.bootstrap_servers, sdk_topics.check)
    wait_until(
        lambda: committed_offsets(sdk_topics.bootstrap_servers, sdk_topics.group) == ends,
        what="check offsets committed",
    )
    assert producer.check_stats().answered == 1


def test_other_groups_checks_do_not_hold_ours_back(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    # Groups share the check topic. A group's producer reads the others' requests only to
    # skip them; a poll that brought none of its own must not pause as if the topic were
    # quiet (a busy neighbour's checks had held a group's own back for minutes).
    others = [check_of(f"other-{i}", "payments") for i in range(5000)]
    publish(
        sdk_topics.bootstrap_servers,
        sdk_topics.check,
        [*others, check_of("tx-ours", sdk_topics.group)],
    )
    listener = RecordingListener()
    started = time.monotonic()
    make_producer(listener, poll_wait_seconds=2.0)  # the SDK's default
    wait_until(lambda: len(listener.checked) == 1, timeout=120, what="our check answered")
    # 5,000 skipped records at the answerer's 100 per poll: 50 polls, and a wait after each
    # took 25 s or more, waits a loaded machine only makes longer. Without them, reading and
    # skipping takes a few seconds; the bound leaves a loaded machine the rest.
    assert time.monotonic() - started < 20
    assert [r.transaction_id for r in listener.checked] == ["tx-ours"]


def test_a_check_listener_that_raises_answers_unknown(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    def boom(request: CheckRequest) -> State:
        raise RuntimeError("cannot tell")

    make_producer(RecordingListener(check=boom))
    publish(sdk_topics.bootstrap_servers, sdk_topics.check, [check_of("tx-1", sdk_topics.group)])
    ops = ops_by_transaction(sdk_topics, 1)
    assert [(h[fmt.OP], h[fmt.FROM_CHECK]) for h in ops["tx-1"]] == [(b"UNKNOWN", b"true")]


def test_any_live_producer_of_the_group_answers(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    first, second = RecordingListener(), RecordingListener()
    producer_a = make_producer(first)
    make_producer(second)
    wait_until(
        lambda: group_members(sdk_topics.bootstrap_servers, sdk_topics.group) == 2,
        what="both producers holding check partitions",
    )
    batch_one = [check_of(f"a-{i}", sdk_topics.group) for i in range(20)]
    publish(sdk_topics.bootstrap_servers, sdk_topics.check, batch_one)
    wait_until(lambda: len(first.checked) + len(second.checked) == 20, what="20 answers")
    assert first.checked and second.checked  # the group shared the requests

    producer_a.shutdown()
    batch_two = [check_of(f"b-{i}", sdk_topics.group) for i in range(20)]
    publish(sdk_topics.bootstrap_servers, sdk_topics.check, batch_two)
    wait_until(
        lambda: sum(r.transaction_id.startswith("b-") for r in second.checked) == 20,
        what="the survivor answering every later request",
    )
    assert not any(r.transaction_id.startswith("b-") for r in first.checked)
    ops = ops_by_transaction(sdk_topics, 40)
    assert sorted(ops) == sorted([f"a-{i}" for i in range(20)] + [f"b-{i}" for i in range(20)])


def test_a_slow_listener_with_a_tiny_queue_loses_nothing_and_answers_each_check_once(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    listener = RecordingListener(delay=0.03)
    producer = make_producer(listener, check_workers=1, check_queue_size=2)
    records = [check_of(f"t-{i}", sdk_topics.group, 1 + i % 2) for i in range(40)]
    # The coordinator writes the check topic at least once: a replay repeats requests.
    records += records[:15]
    publish(sdk_topics.bootstrap_servers, sdk_topics.check, records)

    wait_until(lambda: len(listener.checked) >= 40, timeout=60, what="40 distinct answers")
    ops = ops_by_transaction(sdk_topics, 40)
    assert Counter({tx: len(hs) for tx, hs in ops.items()}) == Counter(
        {f"t-{i}": 1 for i in range(40)}
    )
    assert set(listener.check_counts().values()) == {1}
    assert producer.check_stats().high_water <= 2
    # Counted just after its acknowledgement, in a worker's thread: waited for, not read.
    wait_until(lambda: producer.check_stats().answered == 40, what="40 answers counted")
    ends = end_offsets(sdk_topics.bootstrap_servers, sdk_topics.check)
    wait_until(
        lambda: committed_offsets(sdk_topics.bootstrap_servers, sdk_topics.group) == ends,
        what="every offset committed, the repeats too",
    )


def test_shutdown_is_clean_idempotent_and_a_restart_answers_nothing_twice(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    first = RecordingListener()
    producer = make_producer(first)
    publish(
        sdk_topics.bootstrap_servers,
        sdk_topics.check,
        [check_of(f"t-{i}", sdk_topics.group) for i in range(5)],
    )
    wait_until(lambda: producer.check_stats().answered == 5)
    producer.shutdown()
    producer.shutdown()
    assert not [t for t in threading.enumerate() if t.name.startswith("txcoord-check-")]
    ends = end_offsets(sdk_topics.bootstrap_servers, sdk_topics.check)
    assert committed_offsets(sdk_topics.bootstrap_servers, sdk_topics.group) == ends

    second = RecordingListener()
    make_producer(second)
    publish(sdk_topics.bootstrap_servers, sdk_topics.check, [check_of("new", sdk_topics.group)])
    wait_until(lambda: len(second.checked) == 1)
    # Positive marker: the new producer has consumed (committed) up to the end of every
    # partition, so a request it wrongly answered again would be in `checked` by now.
    ends = end_offsets(sdk_topics.bootstrap_servers, sdk_topics.check)
    wait_until(
        lambda: committed_offsets(sdk_topics.bootstrap_servers, sdk_topics.group) == ends,
        what="the restarted producer to consume to the end",
    )
    assert [r.transaction_id for r in second.checked] == ["new"]


def test_requests_abandoned_at_shutdown_are_answered_by_the_next_producer(
    sdk_topics: SdkTopics, make_producer: ProducerFactory
) -> None:
    release = threading.Event()

    def stuck(request: CheckRequest) -> State:
        release.wait(30)
        return State.COMMIT_MESSAGE

    producer = make_producer(RecordingListener(check=stuck), check_workers=1, check_queue_size=5)
    publish(
        sdk_topics.bootstrap_servers,
        sdk_topics.check,
        [check_of(f"t-{i}", sdk_topics.group) for i in range(3)],
    )
    wait_until(lambda: producer.check_stats().taken == 3)
    producer.shutdown(timeout=0.2)
    assert producer.check_stats().abandoned >= 2
    release.set()  # the stuck answer now meets a closed transport: abandoned too

    survivor = RecordingListener()
    make_producer(survivor)
    wait_until(lambda: len(survivor.checked) == 3, what="the abandoned requests delivered again")
    assert sorted(r.transaction_id for r in survivor.checked) == ["t-0", "t-1", "t-2"]


def test_start_fails_clearly_without_a_broker() -> None:
    producer = TransactionProducer(
        group="orders",
        listener=RecordingListener(),
        bootstrap_servers="127.0.0.1:9",
        send_timeout_seconds=2,
    )
    with pytest.raises(TransportError, match=r"cannot connect to Kafka at 127\.0\.0\.1:9"):
        producer.start()
    producer.shutdown()
