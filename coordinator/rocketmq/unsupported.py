"""The RPCs this endpoint does not serve: each answers NOT_IMPLEMENTED, never an error.

A pull consumer's calls (PullMessage and the offsets), ForwardMessageToDeadLetterQueue and
RocketMQ's newer ones (RecallMessage, SyncLiteSubscription: UNSUPPORTED) get a Status a
client reads as "not here" (rocketmq-client raises UnsupportedException). A SimpleConsumer's
and a PushConsumer's calls are served (consumers.py). There is no dead-letter queue: a push
consumer calls ForwardMessageToDeadLetterQueue only in a FIFO group, and this endpoint's
groups are not FIFO (push.py), so a message whose consumption keeps failing comes again
after each backoff, its delivery attempt counting up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

from coordinator.rocketmq.codes import Code, status

__all__ = ["Unsupported"]

_CONSUMERS = (
    "only SimpleConsumer's and PushConsumer's calls are served by this endpoint: read "
    "committed messages with either (docs/rocketmq.md)"
)


def _answer(response: type, what: str) -> Any:
    return response(status=status(Code.NOT_IMPLEMENTED, f"{what}: {_CONSUMERS}"))


class Unsupported(service_grpc.MessagingServiceServicer):  # type: ignore[misc]
    """The MessagingService calls that answer NOT_IMPLEMENTED."""

    def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = service.ForwardMessageToDeadLetterQueueResponse
        return response(
            status=status(
                Code.NOT_IMPLEMENTED,
                "ForwardMessageToDeadLetterQueue: there is no dead-letter queue here, and no "
                "FIFO consumer group (a failed message comes again after its backoff)",
            )
        )

    def PullMessage(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        yield _answer(service.PullMessageResponse, "PullMessage")

    def UpdateOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        return _answer(service.UpdateOffsetResponse, "UpdateOffset")

    def GetOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        return _answer(service.GetOffsetResponse, "GetOffset")

    def QueryOffset(self, request: Any, context: Any) -> Any:  # noqa: N802
        return _answer(service.QueryOffsetResponse, "QueryOffset")

    def RecallMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = service.RecallMessageResponse
        return response(
            status=status(Code.UNSUPPORTED, "RecallMessage: there are no delayed messages here")
        )

    def SyncLiteSubscription(self, request: Any, context: Any) -> Any:  # noqa: N802
        response = service.SyncLiteSubscriptionResponse
        return response(status=status(Code.UNSUPPORTED, "SyncLiteSubscription: no lite topics"))
