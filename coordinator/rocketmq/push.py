"""What a RocketMQ PushConsumer needs besides a SimpleConsumer's calls: its settings, its
subscriptions, and its assignment.

A PushConsumer (RocketMQ 5's Java client: PushConsumerImpl) sends its Settings on the
Telemetry stream (its group and each topic's filter expression) and reads back the server's:
`fifo`, `receive_batch_size`, `long_polling_timeout` and the backoff policy of a failed
consumption. Every 5 s it asks `QueryAssignment` for each topic, keeps one process queue
per assigned message queue, and long-polls `ReceiveMessage` naming that queue, with
`auto_renew` set and no invisible duration (a SimpleConsumer sets both the other way). A
message its listener fails is nacked (ChangeInvisibleDuration by the backoff policy);
`ForwardMessageToDeadLetterQueue` is a FIFO group's only, and this endpoint's groups are not
FIFO (docs/rocketmq.md).

`PushClients` remembers each consumer client's group and subscriptions from its Settings:
`QueryAssignment` names no filter expression, yet it makes the client's member, whose
subscription is fixed by its first call (coordinator/rest/consumers.py); and
NotifyClientTermination names no topic, yet the client's members leave their group then.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as service

from coordinator.rocketmq.codes import ok
from coordinator.rocketmq.messages import describe_queue

__all__ = [
    "BACKOFF_INITIAL_SECONDS",
    "BACKOFF_MAX_SECONDS",
    "MAX_ATTEMPTS",
    "RECEIVE_BATCH_SIZE",
    "ClientSubscriptions",
    "PushClients",
    "assignment_response",
    "is_push",
    "push_settings",
]

#: Messages one ReceiveMessage of a push consumer asks at most (RocketMQ's proxy: 32).
RECEIVE_BATCH_SIZE = 16
#: A failed consumption comes again after 1 s, 2 s, 4 s ... at most 10 s (the client nacks
#: with ChangeInvisibleDuration by this policy).
BACKOFF_INITIAL_SECONDS = 1
BACKOFF_MAX_SECONDS = 10
#: What the client is told; this endpoint has no dead-letter queue, so a standard (not FIFO)
#: group's failed message comes again after each backoff whatever its attempt.
MAX_ATTEMPTS = 16
#: Consumer clients remembered at most (the oldest forgotten first).
MAX_CLIENTS = 4096


@dataclass(frozen=True)
class ClientSubscriptions:
    """A consumer client's group and, per topic, its filter expression (from its Settings)."""

    group: str
    filters: dict[str, pb.FilterExpression] = field(default_factory=dict)


class PushClients:
    """The consumer clients' subscriptions, by client id (thread-safe, bounded)."""

    def __init__(self, max_clients: int = MAX_CLIENTS) -> None:
        self.max_clients = max_clients
        self._lock = threading.Lock()
        self._clients: dict[str, ClientSubscriptions] = {}

    def settings(self, client_id: str, settings: pb.Settings) -> None:
        """Record a consumer's Settings (a producer's are ignored)."""
        if not settings.HasField("subscription"):
            return
        subscription = settings.subscription
        filters = {}
        for entry in subscription.subscriptions:
            expression = pb.FilterExpression()
            expression.CopyFrom(entry.expression)
            filters[str(entry.topic.name)] = expression
        found = ClientSubscriptions(str(subscription.group.name), filters)
        with self._lock:
            self._clients.pop(client_id, None)  # newest last: the oldest is evicted first
            self._clients[client_id] = found
            while len(self._clients) > self.max_clients:
                del self._clients[next(iter(self._clients))]

    def of(self, client_id: str) -> ClientSubscriptions | None:
        """Return what `client_id`'s Settings said, or None if none came."""
        with self._lock:
            return self._clients.get(client_id)

    def forget(self, client_id: str) -> ClientSubscriptions | None:
        """Forget `client_id` (it terminated); return what it had said."""
        with self._lock:
            return self._clients.pop(client_id, None)


def push_settings(settings: pb.Settings, long_polling_seconds: float) -> None:
    """Fill in what the server decides for a push consumer, in place: not FIFO, the batch,
    the long polling timeout and the backoff of a failed consumption (the Java client
    rejects Settings without a backoff strategy)."""
    subscription = settings.subscription
    subscription.fifo = False
    subscription.receive_batch_size = RECEIVE_BATCH_SIZE
    subscription.long_polling_timeout.FromMilliseconds(int(long_polling_seconds * 1000))
    policy = settings.backoff_policy
    policy.max_attempts = MAX_ATTEMPTS
    policy.exponential_backoff.initial.FromSeconds(BACKOFF_INITIAL_SECONDS)
    policy.exponential_backoff.max.FromSeconds(BACKOFF_MAX_SECONDS)
    policy.exponential_backoff.multiplier = 2.0


def assignment_response(
    topic: str, queue_ids: list[int], endpoints: pb.Endpoints
) -> service.QueryAssignmentResponse:
    """Return the QueryAssignment answer of `topic`'s queues `queue_ids`, each described as
    QueryRoute describes it."""
    answer = service.QueryAssignmentResponse(status=ok())
    for queue_id in sorted(queue_ids):
        describe_queue(answer.assignments.add().message_queue, topic, queue_id, endpoints)
    return answer


def is_push(request: Any) -> bool:
    """Return whether a ReceiveMessage is a push consumer's: it asks for auto-renewal and
    names no invisible duration (a SimpleConsumer the opposite), and reads the queue it
    names."""
    return bool(request.auto_renew) and not request.HasField("invisible_duration")
