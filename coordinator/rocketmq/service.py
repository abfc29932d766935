"""The MessagingService calls of a transactional producer, onto the REST ingress's service layer.

    QueryRoute               this endpoint's address (the one the client dialled), one
                             MessageQueue per queue of the topic (default_queue_count),
                             accepting TRANSACTION messages
    Heartbeat                OK
    Telemetry                Settings answered; check-backs pushed (telemetry.py)
    SendMessage              TRANSACTION: a half, validated and made durable exactly as
                             POST /v1/transactions (coordinator/rest/routes.send_half) before
                             the answer; every other message type: UNSUPPORTED
    EndTransaction           COMMIT / ROLLBACK (TRANSACTION_RESOLUTION_UNSPECIFIED: UNKNOWN) as an
                             op record, from_check when the source is SOURCE_SERVER_CHECK
    NotifyClientTermination  the client's streams closed; a consumer's members leave their
                             group (their queues go to its other members)
    ReceiveMessage, AckMessage, ChangeInvisibleDuration, QueryAssignment   a SimpleConsumer's
                             and a PushConsumer's (consumers.py, push.py)
    the rest                 NOT_IMPLEMENTED / UNSUPPORTED (unsupported.py)

Every call is authenticated first (credentials.py). A refusal is a Status with a RocketMQ
Code (codes.py); a bug is logged and answered INTERNAL_SERVER_ERROR; nothing a client sends
ends a stream or the endpoint.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
from collections.abc import Iterator
from typing import Any

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as service

from coordinator.core.state_machine import Event
from coordinator.core.topics import group_topic_problem
from coordinator.protocol import ingress as fmt
from coordinator.protocol.names import topic_name_problem
from coordinator.rest.auth import Principal, require_group
from coordinator.rest.errors import ApiError
from coordinator.rest.models import OpRequest
from coordinator.rest.records import op_record
from coordinator.rest.routes import send_half
from coordinator.rocketmq.calls import client_id_of
from coordinator.rocketmq.codes import Code, RefusedError, ok, status
from coordinator.rocketmq.consumers import ConsumerCalls
from coordinator.rocketmq.messages import describe_queue, half_request, instance_of
from coordinator.rocketmq.push import push_settings
from coordinator.rocketmq.telemetry import LiveStream, LiveStreams, TooManyStreamsError

__all__ = ["MessagingService"]

log = logging.getLogger("txcoord.rocketmq")

_TRANSACTION_ID = fmt.TRANSACTION_ID_PATTERN
_OPS = {
    pb.TransactionResolution.COMMIT: Event.COMMIT.value,
    pb.TransactionResolution.ROLLBACK: Event.ROLLBACK.value,
    # A checker that cannot tell: recorded for audit, decides nothing (contract 3).
    pb.TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED: Event.UNKNOWN.value,
}
#: How often a Telemetry stream looks whether its client is still there.
_STREAM_TICK_SECONDS = 0.5


class MessagingService(ConsumerCalls):
    """apache.rocketmq.v2.MessagingService for transactional producers."""

    # -- the calls -------------------------------------------------------------------------
    def QueryRoute(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
        def route(who: Principal) -> Any:
            topic = self._topic(request.topic)
            self.streams.named(client_id_of(context), who, topic)
            endpoints = pb.Endpoints()
            endpoints.CopyFrom(request.endpoints)
            answer = service.QueryRouteResponse(status=ok())
            for queue_id in range(self.services.config.default_queue_count):
                describe_queue(answer.message_queues.add(), topic, queue_id, endpoints)
            return answer

        return self._call(context, service.QueryRouteResponse, route)

    def Heartbeat(self, request: Any, context: Any) -> Any:  # noqa: N802
        return self._call(
            context, service.HeartbeatResponse, lambda who: service.HeartbeatResponse(status=ok())
        )

    def SendMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        def send(who: Principal) -> Any:
            if len(request.messages) != 1:
                raise RefusedError(
                    Code.BAD_REQUEST,
                    f"a transactional send carries one message, not {len(request.messages)}",
                )
            (message,) = request.messages
            topic = self._topic(message.topic)
            group = self._group(who, topic)
            client_id = client_id_of(context)
            half = half_request(
                message, group, instance_of(client_id), self.services.config.max_message_size
            )
            result = send_half(half, self.services, who)
            self.streams.named(client_id, who, topic)
            answer = service.SendMessageResponse(status=ok())
            entry = answer.entries.add()
            entry.status.CopyFrom(ok())
            entry.message_id = message.system_properties.message_id
            entry.transaction_id = result.transaction_id
            entry.offset = result.offset  # of the half in its Kafka partition
            return answer

        return self._call(context, service.SendMessageResponse, send)

    def EndTransaction(self, request: Any, context: Any) -> Any:  # noqa: N802
        def end(who: Principal) -> Any:
            topic = self._topic(request.topic)
            group = self._group(who, topic)
            transaction_id = request.transaction_id
            if not _matches(_TRANSACTION_ID, transaction_id):
                raise RefusedError(
                    Code.INVALID_TRANSACTION_ID,
                    f"transaction_id {transaction_id!r} is not a transaction id of this endpoint",
                )
            op = _OPS.get(request.resolution)
            if op is None:
                raise RefusedError(Code.BAD_REQUEST, f"resolution {request.resolution} is unknown")
            from_check = request.source == pb.TransactionSource.SOURCE_SERVER_CHECK
            op_request = OpRequest(producer_group=group, from_check=from_check)
            svc = self.services
            svc.writer.send_op(op_record(transaction_id, op, op_request, svc.clock()))
            svc.metrics.records.labels("op").inc()
            return service.EndTransactionResponse(status=ok())

        return self._call(context, service.EndTransactionResponse, end)

    def NotifyClientTermination(self, request: Any, context: Any) -> Any:  # noqa: N802
        def terminate(who: Principal) -> Any:
            client_id = client_id_of(context)
            self.streams.terminated(client_id)
            self.terminated(client_id, who)
            return service.NotifyClientTerminationResponse(status=ok())

        return self._call(context, service.NotifyClientTerminationResponse, terminate)

    def Telemetry(self, request_iterator: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        try:
            who = self.credentials.authenticate(context.invocation_metadata())
            client_id = client_id_of(context)
            stream = self.streams.open(client_id, who)
        except RefusedError as exc:
            yield service.TelemetryCommand(status=status(exc.code, exc.message))
            return
        except TooManyStreamsError as exc:
            yield service.TelemetryCommand(status=status(Code.TOO_MANY_REQUESTS, str(exc)))
            return
        context.add_callback(lambda: self.streams.close(stream))
        reader = threading.Thread(
            target=self._read_commands,
            args=(request_iterator, stream),
            name="rocketmq-telemetry-reader",
            daemon=True,
        )
        reader.start()
        try:
            while not stream.closed.is_set() and context.is_active():
                try:
                    yield stream.outbox.get(timeout=_STREAM_TICK_SECONDS)
                except queue.Empty:
                    continue
        finally:
            self.streams.close(stream)

    # -- the parts -------------------------------------------------------------------------
    def _read_commands(self, commands: Iterator[Any], stream: LiveStream) -> None:
        """Answer the client's commands until it ends the stream; bad ones end nothing."""
        try:
            for command in commands:
                try:
                    self._command(command, stream)
                except Exception:  # a bug: logged, the stream goes on
                    log.exception("bug: a Telemetry command of %s", stream.client_id)
                    stream.push(
                        service.TelemetryCommand(
                            status=status(Code.INTERNAL_SERVER_ERROR, "internal error")
                        )
                    )
        except Exception as exc:  # the client went away mid-read
            log.debug("Telemetry stream of %s ended: %s", stream.client_id, exc)
        finally:
            self.streams.close(stream)

    def _command(self, command: Any, stream: LiveStream) -> None:
        if not command.HasField("settings"):
            return  # a thread dump or a verification result nobody asked for: nothing to do
        settings = pb.Settings()
        settings.CopyFrom(command.settings)
        if settings.client_type == pb.ClientType.PRODUCER:
            topics = []
            for resource in settings.publishing.topics:
                if topic_name_problem(resource.name) is None:
                    topics.append(resource.name)
            self.streams.producer_settings(stream, topics)
            settings.publishing.max_body_size = self.services.config.max_message_size
            settings.publishing.validate_message_type = True
        elif settings.client_type in (pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER):
            self.clients.settings(stream.client_id, settings)
            if settings.client_type == pb.ClientType.PUSH_CONSUMER:
                max_wait = self.services.config.rest.check_poll_max_wait.total_seconds()
                push_settings(settings, max_wait)
        stream.push(service.TelemetryCommand(status=ok(), settings=settings))

    def _group(self, who: Principal, topic: str) -> str:
        """Return the producer group `who` acts as on `topic`; refuse one it may not."""
        group = LiveStreams.group_of(who, topic)
        try:
            require_group(who, group, "the credentials")
        except ApiError as exc:
            raise RefusedError(Code.FORBIDDEN, exc.message) from None
        layout = self.services.config.kafka.layout
        if layout.per_group and (problem := group_topic_problem(group, layout)):
            raise RefusedError(Code.BAD_REQUEST, f"producer group: {problem}")
        return group


def _matches(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text) is not None
