"""The push consumer: a listener called for each message, acknowledged when it succeeds.

RocketMQ's PushConsumer with Pythonic names::

    class Billing(MessageListener):
        def consume(self, message: MessageView) -> ConsumeResult:
            charge(message.body)
            return ConsumeResult.SUCCESS

    consumer = PushConsumer("billing", {"OrderPaid": "*"}, Billing(),
                            bootstrap_servers="127.0.0.1:9092", warehouse="warehouse")
    consumer.start()
    ...
    consumer.shutdown()

A thread receives (coordinator/sdk/consumer/simple_consumer.py) and hands each message to a
pool of `threads` workers. SUCCESS acknowledges it; FAILURE, an exception or None hands it
out again after `retry_delay` seconds (its `delivery_attempt` grows). With `orderly=True`
(RocketMQ's orderly listener) a queue's next message is handed out only once the previous
one succeeded, so the listener sees each queue in offset order; a failure holds the queue
for `retry_delay` and then retries the same message. Before a rebalance hands queues over,
the messages in the listener's hands are let finish (HAND_OVER_WAIT_SECONDS at most), so
that their acknowledgements are stored rather than repeated by the queues' next owners.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from coordinator.sdk.consumer.message_view import MessageView
from coordinator.sdk.consumer.simple_consumer import SimpleConsumer

log = logging.getLogger(__name__)

#: Before a rebalance, how long the listener's messages in hand may take to finish (so that
#: their acknowledgements are stored with the hand-over): well under the session timeout,
#: as the wait holds the group's heartbeats.
HAND_OVER_WAIT_SECONDS = 3.0

__all__ = ["ConsumeResult", "MessageListener", "PushConsumer"]


class ConsumeResult(enum.Enum):
    """What a listener says of a message."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"


class MessageListener:
    """The application's handling of one message; override `consume`."""

    def consume(self, message: MessageView) -> ConsumeResult:
        """Handle `message`; SUCCESS acknowledges it, anything else retries it later."""
        raise NotImplementedError


class PushConsumer:
    """Call `listener` for every message of `subscriptions` this member of `group` reads."""

    def __init__(
        self,
        group: str,
        subscriptions: Mapping[str, str] | Iterable[str],
        listener: MessageListener,
        *,
        threads: int = 4,
        retry_delay: float = 1.0,
        orderly: bool = False,
        **options: Any,
    ) -> None:
        """`options` are the SimpleConsumer's (bootstrap_servers, warehouse, start_from...)."""
        if threads < 1:
            raise ValueError("threads must be at least 1")
        self.listener = listener
        self.retry_delay = retry_delay
        self.consumer = SimpleConsumer(group, subscriptions, orderly=orderly, **options)
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._room = threading.Semaphore(threads * 2)  # messages taken, not yet settled
        self._in_hand = 0  # messages submitted to the listener, not yet settled
        self._settled = threading.Condition()
        self.consumer.before_hand_over = self._finish_in_hand
        self._stopping = threading.Event()
        self._receiver: threading.Thread | None = None
        #: Settled messages: (succeeded, failed) (for tests and metrics).
        self.succeeded = 0
        self.failed = 0
        self._counts = threading.Lock()

    def start(self) -> PushConsumer:
        """Join the group and start calling the listener; return self."""
        self.consumer.start()
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="txcoord-consume")
        self._receiver = threading.Thread(
            target=self._receive, name="txcoord-push-consumer", daemon=True
        )
        self._receiver.start()
        return self

    def shutdown(self) -> None:
        """Stop receiving, let the listener finish what it has, store offsets, leave."""
        self._stopping.set()
        if self._receiver is not None:
            self._receiver.join(timeout=30)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self.consumer.close()

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _receive(self) -> None:
        assert self._pool is not None
        while not self._stopping.is_set():
            if not self._room.acquire(timeout=0.5):
                continue  # every worker busy
            room = 1
            while room < self._threads * 2 and self._room.acquire(blocking=False):
                room += 1
            try:
                messages = self.consumer.receive(max_messages=room, wait_seconds=0.5)
            except Exception as exc:  # Kafka or the warehouse away a moment: try again
                log.warning("push consumer: receive failed: %s", exc)
                messages = []
                self._stopping.wait(1.0)
            for _ in range(room - len(messages)):
                self._room.release()
            for message in messages:
                with self._settled:
                    self._in_hand += 1
                self._pool.submit(self._consume, message)

    def _finish_in_hand(self) -> None:
        """Wait (HAND_OVER_WAIT_SECONDS at most) for the listener's messages in hand."""
        with self._settled:
            if not self._settled.wait_for(lambda: self._in_hand == 0, HAND_OVER_WAIT_SECONDS):
                log.warning(
                    "push consumer: %d message(s) still in the listener at a rebalance: they "
                    "may be delivered again",
                    self._in_hand,
                )

    def _consume(self, message: MessageView) -> None:
        try:
            try:
                result = self.listener.consume(message)
            except Exception:
                log.exception(
                    "listener failed on %s/%s@%s",
                    message.topic,
                    message.queue_id,
                    message.queue_offset,
                )
                result = ConsumeResult.FAILURE
            if result is ConsumeResult.SUCCESS:
                self.consumer.ack(message)
                with self._counts:
                    self.succeeded += 1
            else:
                self.consumer.change_invisible_duration(message, self.retry_delay)
                with self._counts:
                    self.failed += 1
        finally:
            self._room.release()
            with self._settled:
                self._in_hand -= 1
                self._settled.notify_all()
