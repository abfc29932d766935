"""A RocketMQ SimpleConsumer's calls, onto the REST ingress's consumers (contract 5.5).

    ReceiveMessage            a receive of the member this client is in its consumer group
                              (coordinator/rest/consumers.py): long polling up to the call's
                              long_polling_timeout (at most rest.check_poll_max_wait), each
                              message invisible for the call's invisible_duration; answered
                              as RocketMQ's proxy does: the messages, then OK, or
                              MESSAGE_NOT_FOUND when none came
    AckMessage                an ack of each entry's receipt handle
    ChangeInvisibleDuration   a change of invisible duration; the receipt handle stays good

A client's member in a consumer group is one per topic (`member_of`: a digest of its client
id and the topic), so a SimpleConsumer of several topics is several members; the group's
members divide each topic's queues (Kafka's group protocol), and a member gets the messages
of its queues whatever queue the call names (RocketMQ 5's pop reads a broker's queues alike).
A new group starts at the end (RocketMQ's ConsumeInitMode.MAX). The token's consume grants
decide who may (auth.py): FORBIDDEN otherwise. Tag filters: `*`, `TagA || TagB`; SQL92
filters are UNSUPPORTED.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as service

from coordinator.core.topics import consumer_group_topic_problem
from coordinator.protocol.names import group_problem
from coordinator.rest.auth import Principal, require_consume
from coordinator.rest.consumers import (
    ConsumersFullError,
    ConsumerUnavailableError,
    Outcome,
    Subscription,
    SubscriptionConflictError,
    UnackedLimitError,
)
from coordinator.rest.in_flight import holder_of
from coordinator.rest.models import MAX_RECEIVE, ReceiveRequest, receive_request
from coordinator.rest.poll_slots import PollSlotsFullError
from coordinator.rocketmq.calls import Calls, client_id_of
from coordinator.rocketmq.codes import Code, RefusedError, ok, status
from coordinator.rocketmq.messages import delivered_message

__all__ = ["ConsumerCalls", "member_of"]

#: Left of a long poll for the answer to travel: the client's deadline is its request
#: timeout past the long-polling timeout.
_ANSWER_MARGIN_SECONDS = 0.5


#: The REST ingress's receive request with its bound on the wait, made once per bound.
_receive_model = functools.lru_cache(maxsize=4)(receive_request)


def member_of(client_id: str, topic: str) -> str:
    """Return the consumer member a client is on `topic` (GROUP_PATTERN's alphabet)."""
    digest = hashlib.sha256(f"{client_id}\0{topic}".encode("utf-8", "surrogateescape"))
    return "rmq-" + digest.hexdigest()[:40]


def _seconds(duration: Any) -> float:
    seconds: float = duration.seconds + duration.nanos / 1e9
    return seconds


class ConsumerCalls(Calls):
    """ReceiveMessage, AckMessage and ChangeInvisibleDuration of a SimpleConsumer."""

    def ReceiveMessage(self, request: Any, context: Any) -> Iterator[Any]:  # noqa: N802
        answers: list[Any] = []

        def receive(who: Principal) -> Any:
            answers.extend(self._receive(request, context, who))
            if not answers:
                return service.ReceiveMessageResponse(
                    status=status(Code.MESSAGE_NOT_FOUND, "no new message")
                )
            return service.ReceiveMessageResponse(status=ok())

        final = self._call(context, service.ReceiveMessageResponse, receive)
        yield from answers  # none when refused
        yield final

    def AckMessage(self, request: Any, context: Any) -> Any:  # noqa: N802
        def ack(who: Principal) -> Any:
            group, member = self._member(request.group, request.topic, context, who)
            receipts = [entry.receipt_handle for entry in request.entries]
            outcomes = self.services.consumers.ack(group, member, receipts)
            answer = service.AckMessageResponse(status=_overall(outcomes))
            for entry, outcome in zip(request.entries, outcomes, strict=True):
                answered = answer.entries.add()
                answered.message_id = entry.message_id
                answered.receipt_handle = entry.receipt_handle
                answered.status.CopyFrom(_entry_status(outcome))
            self.services.metrics.messages_acked.inc(sum(o.done for o in outcomes))
            return answer

        return self._call(context, service.AckMessageResponse, ack)

    def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:  # noqa: N802
        def change(who: Principal) -> Any:
            group, member = self._member(request.group, request.topic, context, who)
            seconds = _seconds(request.invisible_duration)
            (outcome,) = self.services.consumers.change_invisible_duration(
                group, member, [request.receipt_handle], seconds
            )
            return service.ChangeInvisibleDurationResponse(
                status=_entry_status(outcome), receipt_handle=request.receipt_handle
            )

        return self._call(context, service.ChangeInvisibleDurationResponse, change)

    # -- the parts -------------------------------------------------------------------------
    def _member(
        self, group_resource: Any, topic_resource: Any, context: Any, who: Principal
    ) -> tuple[str, str]:
        """Return the (consumer group, member) a call acts as; refuse one it may not."""
        topic = self._topic(topic_resource)
        group = self._group_name(group_resource)
        require_consume(who, group, topic, ("group", "topic"))
        return group, member_of(client_id_of(context), topic)

    def _group_name(self, resource: Any) -> str:
        if resource.resource_namespace:
            raise RefusedError(Code.UNSUPPORTED, "resource namespaces are not supported")
        group = str(resource.name)
        # The REST ingress's rule for a consumer group (its path), in either layout.
        if problem := group_problem(group, "group"):
            raise RefusedError(Code.ILLEGAL_CONSUMER_GROUP, problem)
        layout = self.services.config.kafka.layout
        if layout.per_group and (problem := consumer_group_topic_problem(group, layout)):
            raise RefusedError(Code.ILLEGAL_CONSUMER_GROUP, f"group: {problem}")
        return group

    def _receive(self, request: Any, context: Any, who: Principal) -> list[Any]:
        """Hand out the member's messages; return the answers before the final status."""
        svc = self.services
        expression = request.filter_expression
        if expression.type not in (pb.FilterType.TAG, pb.FilterType.FILTER_TYPE_UNSPECIFIED):
            raise RefusedError(Code.UNSUPPORTED, "only TAG filter expressions are supported")
        topic = self._topic(request.message_queue.topic)
        group, member = self._member(request.group, request.message_queue.topic, context, who)
        max_wait = svc.config.rest.check_poll_max_wait.total_seconds()
        wait = _seconds(request.long_polling_timeout) - _ANSWER_MARGIN_SECONDS
        raw = {
            "topic": topic,
            "tag_expression": expression.expression or "*",
            "max_messages": min(request.batch_size or 1, MAX_RECEIVE),
            "wait_seconds": min(max(wait, 0.0), max_wait),
            "member": member,
        }
        if request.HasField("invisible_duration"):
            raw["invisible_seconds"] = _seconds(request.invisible_duration)
        try:
            body: ReceiveRequest = _receive_model(max_wait).model_validate(raw)
        except ValidationError as exc:
            field = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
            code = {
                "tag_expression": Code.ILLEGAL_FILTER_EXPRESSION,
                "invisible_seconds": Code.ILLEGAL_INVISIBLE_TIME,
            }.get(field, Code.BAD_REQUEST)
            raise RefusedError(code, str(exc.errors()[0]["msg"])) from None
        try:
            slot = svc.poll_slots.take(
                f"consumer-group:{group}", holder_of(who), label=f"consumer group {group!r}"
            )
        except PollSlotsFullError as exc:
            raise RefusedError(Code.TOO_MANY_REQUESTS, str(exc)) from exc
        try:
            received = svc.consumers.receive(
                group,
                member,
                Subscription(body.topic, body.tag_expression, body.orderly),
                max_messages=body.max_messages,
                wait_seconds=body.wait_seconds,
                invisible_seconds=body.invisible_seconds,
                start_from=body.start_from,
                holder=holder_of(who),
            )
        except (ConsumersFullError, UnackedLimitError) as exc:
            raise RefusedError(Code.TOO_MANY_REQUESTS, str(exc)) from exc
        except SubscriptionConflictError as exc:
            raise RefusedError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from exc
        except ConsumerUnavailableError as exc:
            raise RefusedError(
                Code.PROXY_TIMEOUT, "the committed messages cannot be read now; receive again"
            ) from exc
        finally:
            slot.release()
        svc.metrics.messages_delivered.inc(len(received.messages))
        if not received.messages:
            return []
        answers: list[Any] = [service.ReceiveMessageResponse()]
        answers[0].delivery_timestamp.GetCurrentTime()
        for delivery in received.messages:
            message = delivered_message(delivery.message, delivery.receipt, body.invisible_seconds)
            answers.append(service.ReceiveMessageResponse(message=message))
        return answers


def _entry_status(outcome: Outcome) -> pb.Status:
    if outcome.done:
        return ok()
    return status(
        Code.INVALID_RECEIPT_HANDLE, f"the receipt handle does not count: {outcome.reason}"
    )


def _overall(outcomes: list[Outcome]) -> pb.Status:
    """Return one ack's status: OK when every entry's is, else its entries' (or several)."""
    done = sum(outcome.done for outcome in outcomes)
    if done == len(outcomes):
        return ok()
    if done == 0 and len(outcomes) == 1:
        return _entry_status(outcomes[0])
    return status(Code.MULTIPLE_RESULTS, f"{done} of {len(outcomes)} acknowledged")
