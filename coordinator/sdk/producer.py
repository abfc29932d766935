"""TransactionProducer: RocketMQ's TransactionMQProducer for the coordinator (contract 5.3).

Usage::

    from coordinator.sdk import (LocalTransactionState, Message, TransactionListener,
                                 TransactionProducer)

    class OrderListener(TransactionListener):
        def execute_local_transaction(self, msg, arg):
            orders.mark_paid(arg, transaction_id=msg.transaction_id)  # the local transaction
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg):
            paid = orders.is_paid(transaction_id=msg.transaction_id)
            return LocalTransactionState.COMMIT_MESSAGE if paid else LocalTransactionState.UNKNOW

    producer = TransactionProducer(group="orders", listener=OrderListener(),
                                   endpoint="http://127.0.0.1:8080", token="...")
    # or: TransactionProducer(group="orders", listener=..., bootstrap_servers="127.0.0.1:9092")
    producer.start()
    result = producer.send_message_in_transaction(
        Message(topic="OrderPaid", body=b"...", keys=["o-1"]), arg=order)
    producer.shutdown()

`send_message_in_transaction` stores the half (durably), runs the local transaction, and
sends its outcome as an op. RocketMQ sends that end-transaction one-way; here the op is
awaited, but a failure to send it is only logged: the half is stored, so the coordinator
will check the group, and any live producer of the group answers (coordinator/sdk/
check_answerer.py).
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
from dataclasses import replace
from types import TracebackType
from typing import Any

from coordinator.core.config import KafkaConfig
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.topics import TopicLayout, group_topic_problem
from coordinator.protocol import ingress as fmt
from coordinator.sdk.check_answerer import CheckAnswerer, CheckStats
from coordinator.sdk.errors import ProducerStateError, SdkError
from coordinator.sdk.listener import TransactionListener, decide
from coordinator.sdk.message import Message, SendResult
from coordinator.sdk.transport import DEFAULT_MAX_MESSAGE_SIZE, Transport

log = logging.getLogger(__name__)

_DEFAULTS = KafkaConfig()
_GROUP = re.compile(fmt.GROUP_PATTERN)
_INSTANCE = re.compile(fmt.PRODUCER_INSTANCE_PATTERN)


def _check_routing(instance_id: str | None, sender_first_seconds: float) -> None:
    """Refuse an instance id or a sender-first delay the routing cannot use."""
    if instance_id is not None and not (
        isinstance(instance_id, str) and _INSTANCE.fullmatch(instance_id)
    ):
        raise ValueError(
            f"instance_id must match {fmt.PRODUCER_INSTANCE_PATTERN}, not {instance_id!r}"
        )
    if not sender_first_seconds >= 0:
        raise ValueError(f"check_sender_first_seconds must be >= 0, not {sender_first_seconds}")


class TransactionProducer:
    """Send messages in transactions and answer the group's checks; see the module docstring.

    Give exactly one of `endpoint` (the REST ingress, with `token`; an https endpoint whose
    certificate a private CA signed with that CA's PEM file as `rest_cafile`),
    `bootstrap_servers` (Kafka) or `transport` (any `Transport`, e.g. the in-memory one in
    tests).
    """

    def __init__(
        self,
        group: str,
        listener: TransactionListener,
        *,
        endpoint: str | None = None,
        token: str | None = None,
        rest_cafile: str | None = None,
        bootstrap_servers: str | None = None,
        kafka_security: KafkaSecurity | None = None,
        half_topic: str = _DEFAULTS.half_topic,
        op_topic: str = _DEFAULTS.op_topic,
        check_topic: str = _DEFAULTS.check_topic,
        topics_per_group: bool = _DEFAULTS.topics_per_group,
        check_workers: int = 2,
        check_queue_size: int = 1000,
        transport: Transport | None = None,
        poll_wait_seconds: float = 2.0,
        send_timeout_seconds: float = 30.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        shutdown_timeout_seconds: float = 10.0,
        instance_id: str | None = None,
        check_sender_first_seconds: float = 2.0,
    ) -> None:
        """Check the arguments; nothing connects until `start()`.

        `instance_id` names this producer instance (default: a random one per producer);
        every half it sends carries it, and the coordinator's checks of those halves go to
        this instance first. Another instance of the group answers them only when this one
        has not within `check_sender_first_seconds` (Kafka: this producer's own wait
        before it answers another instance's check; REST: the ingress's
        `check_sender_first`); 0 turns the routing off (RocketMQ's way: any producer).
        Give a stable `instance_id` (say, the host's name) and a restarted process still gets
        the checks of the halves it sent before; two live instances with one id both answer.
        """
        if not isinstance(group, str) or not _GROUP.fullmatch(group):
            raise ValueError(f"group must match {fmt.GROUP_PATTERN}, not {group!r}")
        if not isinstance(listener, TransactionListener):
            raise TypeError(
                f"listener must be a TransactionListener, not {type(listener).__name__}"
            )
        ways: dict[str, object] = {"endpoint": endpoint, "bootstrap_servers": bootstrap_servers}
        ways["transport"] = transport
        given = [name for name, value in ways.items() if value is not None]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of endpoint (REST ingress) or bootstrap_servers (Kafka), not "
                + (" and ".join(given) or "neither")
            )
        layout = TopicLayout(half=half_topic, op=op_topic, check=check_topic, per_group=True)
        if topics_per_group and (problem := group_topic_problem(group, layout)):
            raise ValueError(problem)
        if kafka_security is not None and bootstrap_servers is None:
            raise ValueError("kafka_security is for Kafka: give it with bootstrap_servers")
        if token is not None and endpoint is None:
            raise ValueError("token is for the REST ingress: give it together with endpoint")
        if rest_cafile is not None and endpoint is None:
            raise ValueError("rest_cafile is for the REST ingress: give it with endpoint")
        for name, count in (
            ("check_workers", check_workers),
            ("check_queue_size", check_queue_size),
            ("max_message_size", max_message_size),
        ):
            if count < 1:
                raise ValueError(f"{name} must be >= 1, not {count}")
        _check_routing(instance_id, check_sender_first_seconds)
        self.group = group
        self.listener = listener
        self.endpoint = endpoint
        self.bootstrap_servers = bootstrap_servers
        self.kafka_security = kafka_security  # names where secrets are, never a secret
        self.half_topic = half_topic
        self.op_topic = op_topic
        self.check_topic = check_topic
        self.topics_per_group = topics_per_group
        self.check_workers = check_workers
        self.check_queue_size = check_queue_size
        self.poll_wait_seconds = poll_wait_seconds
        self.send_timeout_seconds = send_timeout_seconds
        self.max_message_size = max_message_size
        self.shutdown_timeout_seconds = shutdown_timeout_seconds
        self.instance_id = instance_id or uuid.uuid4().hex[:16]
        self.check_sender_first_seconds = check_sender_first_seconds
        self._token = token  # never logged, never in repr
        self.rest_cafile = rest_cafile
        self._transport = transport
        self._answerer: CheckAnswerer | None = None
        self._state = "new"  # new -> running -> stopped
        self._lock = threading.Lock()
        self._sends = 0
        self._sends_done = threading.Condition(self._lock)

    def __repr__(self) -> str:
        via = self.endpoint or self.bootstrap_servers or type(self._transport).__name__
        return (
            f"TransactionProducer(group={self.group!r}, instance={self.instance_id!r}, "
            f"via={via!r}, state={self._state})"
        )

    def _build_transport(self) -> Transport:
        if self._transport is not None:
            return self._transport
        if self.endpoint is not None:
            # Imported here: httpx is needed only by REST users.
            from coordinator.sdk.rest_transport import RestTransport  # noqa: PLC0415

            return RestTransport(
                self.endpoint,
                self.group,
                token=self._token,
                cafile=self.rest_cafile,
                timeout_seconds=self.send_timeout_seconds,
                instance=self._routed_instance,
            )
        from coordinator.sdk.kafka_transport import KafkaTransport  # noqa: PLC0415

        assert self.bootstrap_servers is not None
        return KafkaTransport(
            self.bootstrap_servers,
            self.group,
            half_topic=self.half_topic,
            op_topic=self.op_topic,
            check_topic=self.check_topic,
            topics_per_group=self.topics_per_group,
            send_timeout_seconds=self.send_timeout_seconds,
            max_message_size=self.max_message_size,
            security=self.kafka_security,
            instance=self._routed_instance,
            sender_first_seconds=self.check_sender_first_seconds,
        )

    @property
    def _routed_instance(self) -> str | None:
        """The instance id the halves carry, or None when checks go to any producer."""
        return self.instance_id if self.check_sender_first_seconds > 0 else None

    def start(self) -> None:
        """Connect, and start answering the group's check requests in the background."""
        with self._lock:
            if self._state != "new":
                raise ProducerStateError(f"start() on a producer that is {self._state}")
            self._state = "starting"
        try:
            transport = self._build_transport()
        except BaseException:
            with self._lock:
                self._state = "new"
            raise
        answerer = CheckAnswerer(
            transport,
            self.listener,
            self.group,
            workers=self.check_workers,
            queue_size=self.check_queue_size,
            poll_wait_seconds=self.poll_wait_seconds,
        )
        with self._lock:
            shut_down_meanwhile = self._state != "starting"
            if not shut_down_meanwhile:
                self._transport, self._answerer = transport, answerer
                answerer.start()
                self._state = "running"
        if shut_down_meanwhile:
            transport.close()
            raise ProducerStateError("shutdown() was called while start() was connecting")
        log.info("transaction producer of group %s started", self.group)

    def __enter__(self) -> TransactionProducer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.shutdown()

    def check_stats(self) -> CheckStats:
        """Return the counters of the background check loop."""
        return self._answerer.stats() if self._answerer is not None else CheckStats()

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> SendResult:
        """Store `msg` as a half, run the local transaction, send its outcome; return all three.

        Raises SdkError if the half could not be stored (the local transaction does not run).
        """
        if not isinstance(msg, Message):
            raise TypeError(f"msg must be a Message, not {type(msg).__name__}")
        if len(msg.body) > self.max_message_size:
            raise ValueError(
                f"body is {len(msg.body)} bytes, more than max_message_size "
                f"({self.max_message_size})"
            )
        with self._lock:
            if self._state != "running":
                raise ProducerStateError(
                    f"send_message_in_transaction() on a producer that is {self._state}"
                )
            self._sends += 1
        try:
            return self._send(msg, arg)
        finally:
            with self._lock:
                self._sends -= 1
                self._sends_done.notify_all()

    def _send(self, msg: Message, arg: Any) -> SendResult:
        transport = self._transport
        assert transport is not None
        transaction_id = msg.transaction_id or uuid.uuid4().hex
        half = transport.send_half(msg, transaction_id)
        prepared = replace(msg, transaction_id=transaction_id, msg_id=half.msg_id)
        state = decide(
            lambda: self.listener.execute_local_transaction(prepared, arg),
            "execute_local_transaction",
            transaction_id,
        )
        op_id = None
        try:
            op_id = transport.send_op(transaction_id, state.op, from_check=False).op_id
        except Exception as exc:
            # RocketMQ sends this one-way; a lost op is what the check is for (apache/rocketmq
            # #2840 is the failure when checks cannot answer either).
            log.warning(
                "op %s of transaction %s was not sent (%s); the coordinator will check "
                "the group for it",
                state.op,
                transaction_id,
                exc,
                exc_info=not isinstance(exc, SdkError),
            )
        return SendResult(
            transaction_id=transaction_id,
            msg_id=half.msg_id,
            local_state=state,
            stored_at=half.stored_at,
            partition=half.partition,
            offset=half.offset,
            op_id=op_id,
        )

    def shutdown(self, timeout: float | None = None) -> None:
        """Stop polling, answer queued checks for up to `timeout` s, close; safe to repeat."""
        limit = self.shutdown_timeout_seconds if timeout is None else timeout
        with self._lock:
            if self._state in ("stopped", "stopping"):
                return
            was = self._state
            self._state = "stopping"
        try:
            if was == "new":
                return
            with self._lock:  # sends already under way finish (their ops are awaited)
                self._sends_done.wait_for(lambda: self._sends == 0, timeout=limit)
            if self._answerer is not None:
                self._answerer.stop(limit)
            if self._transport is not None:
                self._transport.close()
        finally:
            with self._lock:
                self._state = "stopped"
            log.info("transaction producer of group %s shut down", self.group)
