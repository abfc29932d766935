"""The RPCs this endpoint does not serve: each answers NOT_IMPLEMENTED, never an error.

A push consumer's and a pull consumer's calls (QueryAssignment,
ForwardMessageToDeadLetterQueue, PullMessage and the offsets) and RocketMQ's newer ones
(RecallMessage, SyncLiteSubscription: UNSUPPORTED) get a Status a client reads as "not
here" (rocketmq-client raises UnsupportedException). A SimpleConsumer's calls are served
(consumers.py); a push consumer reads through txcoord's own consumers (contract 5.5).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

from coordinator.rocketmq.codes import Code, status

__all__ = ["Unsupported"]

_CONSUMERS = (
    "only SimpleConsumer's calls are served by this endpoint: read committed messages with "
    "a SimpleConsumer, or with txcoord's PushConsumer (docs/consumers.md)"
)


def _answer(response: type, what: str) -> Any:
    return response(status=status(Code.NOT_IMPLEMENTED, f"{what}: {_CONSUMERS}"))


class Unsupported(service_grpc.MessagingServiceServicer):  # type: ignore[misc]
    """The MessagingService calls that answer NOT_IMPLEMENTED."""

    def QueryAssignment(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
        return _answer(service.QueryAssignmentResponse, "QueryAssignment")

    def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:  # noqa: N802
        return _answer(
            service.ForwardMessageToDeadLetterQueueResponse, "ForwardMessageToDeadLetterQueue"
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
