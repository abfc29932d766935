"""TransactionProducer over the in-memory transport: the send flow, arguments and lifecycle."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from coordinator.sdk import (
    InMemoryTransport,
    LocalTransactionState,
    Message,
    ProducerStateError,
    TransactionProducer,
    TransportError,
)

from .helpers import RecordingListener, State, check_request, wait_until


def producer_over(transport: InMemoryTransport, listener: RecordingListener) -> TransactionProducer:
    return TransactionProducer(
        group="orders", listener=listener, transport=transport, poll_wait_seconds=0.05
    )


def test_the_half_is_stored_before_the_local_transaction_runs_then_the_op_is_sent() -> None:
    transport = InMemoryTransport()
    seen: list[int] = []

    class Listener(RecordingListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> State | None:
            seen.append(len(transport.halves))
            return super().execute_local_transaction(msg, arg)

    listener = Listener(execute=State.COMMIT_MESSAGE)
    with producer_over(transport, listener) as producer:
        result = producer.send_message_in_transaction(
            Message(topic="OrderPaid", body=b"paid", keys=["o-1"]), arg={"order": 1}
        )
    assert seen == [1]
    ((msg, arg),) = listener.executed
    assert arg == {"order": 1}
    assert (msg.transaction_id, msg.msg_id) == (result.transaction_id, result.msg_id)
    assert (msg.topic, msg.body, msg.keys) == ("OrderPaid", b"paid", ("o-1",))
    assert transport.ops == [(result.transaction_id, "COMMIT", False)]
    assert result.local_state is LocalTransactionState.COMMIT_MESSAGE
    assert result.op_sent and result.op_id == "op-0000-0000000000000000"
    assert (result.partition, result.offset) == (0, 0)
    assert len(result.transaction_id) == 32  # uuid4 hex
    assert transport.closed


def test_a_chosen_transaction_id_is_kept() -> None:
    transport = InMemoryTransport()
    with producer_over(transport, RecordingListener()) as producer:
        result = producer.send_message_in_transaction(Message(topic="T", transaction_id="o-1"))
    assert result.transaction_id == "o-1"
    assert transport.halves[0][0] == "o-1"


class Raises(RecordingListener):
    def execute_local_transaction(self, msg: Message, arg: Any) -> State | None:
        raise RuntimeError("local database down")


@pytest.mark.parametrize(
    ("listener", "op"),
    [
        (RecordingListener(execute=State.COMMIT_MESSAGE), "COMMIT"),
        (RecordingListener(execute=State.ROLLBACK_MESSAGE), "ROLLBACK"),
        (RecordingListener(execute=State.UNKNOW), "UNKNOWN"),
        (RecordingListener(execute=None), "UNKNOWN"),
        (Raises(), "UNKNOWN"),
    ],
    ids=["commit", "rollback", "unknow", "none", "raises"],
)
def test_the_local_state_decides_the_op(listener: RecordingListener, op: str) -> None:
    transport = InMemoryTransport()
    with producer_over(transport, listener) as producer:
        result = producer.send_message_in_transaction(Message(topic="T"))
    assert transport.ops == [(result.transaction_id, op, False)]
    assert result.local_state.op == op


def test_an_op_that_cannot_be_sent_is_logged_and_left_to_the_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = InMemoryTransport()
    with producer_over(transport, RecordingListener()) as producer:
        transport.failing_ops = 1
        result = producer.send_message_in_transaction(Message(topic="T"))
    assert result.local_state is State.COMMIT_MESSAGE
    assert not result.op_sent
    assert len(transport.halves) == 1
    assert "the coordinator will check the group" in caplog.text


def test_a_half_that_cannot_be_stored_raises_and_runs_nothing() -> None:
    transport = InMemoryTransport()
    listener = RecordingListener()
    with producer_over(transport, listener) as producer:
        transport.failing_halves = 1
        with pytest.raises(TransportError):
            producer.send_message_in_transaction(Message(topic="T"))
    assert listener.executed == []
    assert transport.ops == []


def test_the_producer_answers_checks_in_the_background() -> None:
    transport = InMemoryTransport()
    listener = RecordingListener(check=lambda r: State.ROLLBACK_MESSAGE)
    with producer_over(transport, listener) as producer:
        transport.add_checks([check_request("a", 2)])
        wait_until(lambda: len(transport.acknowledged) == 1)
        # Counted just after its acknowledgement, in the worker's thread: waited for, not read.
        wait_until(lambda: producer.check_stats().answered == 1, what="the answer counted")
    assert transport.ops == [("a", "ROLLBACK", True)]


def test_a_body_over_max_message_size_is_refused() -> None:
    producer = TransactionProducer(
        group="orders",
        listener=RecordingListener(),
        transport=InMemoryTransport(),
        max_message_size=4,
        poll_wait_seconds=0.05,
    )
    with producer, pytest.raises(ValueError, match="more than max_message_size"):
        producer.send_message_in_transaction(Message(topic="T", body=b"12345"))


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({}, "exactly one of endpoint .* not neither"),
        ({"endpoint": "http://h", "bootstrap_servers": "h:9092"}, "endpoint and bootstrap"),
        ({"bootstrap_servers": "h:9092", "token": "t"}, "token is for the REST ingress"),
        ({"bootstrap_servers": "h:9092", "group": "no spaces"}, "group must match"),
        ({"bootstrap_servers": "h:9092", "group": "orders\n"}, "group must match"),
        ({"bootstrap_servers": "h:9092", "check_workers": 0}, "check_workers must be >= 1"),
        ({"bootstrap_servers": "h:9092", "check_queue_size": 0}, "check_queue_size must be"),
    ],
)
def test_bad_arguments_are_refused_by_name(options: dict[str, Any], match: str) -> None:
    arguments: dict[str, Any] = {"group": "orders", "listener": RecordingListener(), **options}
    with pytest.raises(ValueError, match=match):
        TransactionProducer(**arguments)


def test_the_listener_must_be_a_transaction_listener() -> None:
    with pytest.raises(TypeError, match="listener must be a TransactionListener"):
        TransactionProducer(group="orders", listener=object(), bootstrap_servers="h:9092")  # type: ignore[arg-type]


def test_construction_connects_to_nothing_and_hides_the_token() -> None:
    producer = TransactionProducer(
        group="orders", listener=RecordingListener(), endpoint="http://127.0.0.1:9", token="s3cret"
    )
    assert "s3cret" not in repr(producer)
    producer.shutdown()  # never started: nothing to do


def test_lifecycle_is_checked_and_shutdown_is_idempotent() -> None:
    transport = InMemoryTransport()
    producer = producer_over(transport, RecordingListener())
    with pytest.raises(ProducerStateError, match="is new"):
        producer.send_message_in_transaction(Message(topic="T"))
    producer.start()
    with pytest.raises(ProducerStateError, match="start\\(\\) on a producer that is running"):
        producer.start()
    producer.shutdown()
    producer.shutdown()
    assert transport.closed
    with pytest.raises(ProducerStateError, match="is stopped"):
        producer.send_message_in_transaction(Message(topic="T"))
    with pytest.raises(ProducerStateError):
        producer.start()
    assert not [t for t in threading.enumerate() if t.name.startswith("txcoord-check-")]


def test_shutdown_waits_for_a_send_under_way() -> None:
    transport = InMemoryTransport()
    entered, release = threading.Event(), threading.Event()

    class Slow(RecordingListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> State | None:
            entered.set()
            release.wait(60)  # released by the test; the timeout only keeps a failure from hanging
            return State.COMMIT_MESSAGE

    producer = producer_over(transport, Slow())
    producer.start()
    results: list[Any] = []
    sender = threading.Thread(
        target=lambda: results.append(producer.send_message_in_transaction(Message(topic="T")))
    )
    sender.start()
    assert entered.wait(60)  # positive marker: the send is inside the local transaction
    stopper = threading.Thread(target=producer.shutdown)
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive() and not transport.closed
    release.set()
    sender.join(60)
    stopper.join(60)
    # The op went out after shutdown began: shutdown waited for the send (the proof; a
    # loaded machine's slow shutdown could also pass the 0.2 s look above).
    assert results[0].op_sent
    assert transport.closed
