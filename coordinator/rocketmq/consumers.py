"""A RocketMQ consumer's calls, onto the REST ingress's consumers (contract 5.5).

    ReceiveMessage            a receive of the member this client is in its consumer group
                              (coordinator/rest/consumers.py): long polling up to the call's
                              long_polling_timeout (at most rest.check_poll_max_wait), each
                              message invisible for the call's invisible_duration; answered
                              as RocketMQ's proxy does: the messages, then OK, or
                              MESSAGE_NOT_FOUND when none came
    AckMessage                an ack of each entry's receipt handle
    ChangeInvisibleDuration   a change of invisible duration; the receipt handle stays good
    QueryAssignment           a PushConsumer's: the queues of the topic its member reads now
                              (push.py), each as QueryRoute describes it

A client's member in a consumer group is one per topic (`member_of`: a digest of its client
id and the topic), so a consumer of several topics is several members; the group's members
divide each topic's queues (Kafka's group protocol, coordinator/sdk/consumer/allocation.py),
and a member hands out the messages of its own queues only. A SimpleConsumer's receive gets
them whatever queue it names (RocketMQ 5's pop reads a broker's queues alike); a
PushConsumer's (push.is_push) gets the named queue's only, in queue order, and nothing once
that queue is another member's: QueryAssignment tells the client which queues are its, and
it keeps one process queue each. `QueryAssignment` makes the member (it joins the group) and
waits up to _JOIN_SECONDS for the group to deal it its queues; an empty answer makes the
client ask again 5 s later. A member leaves its group when its client says
NotifyClientTermination, or after rest's idle timeout without a call (a client that died),
and its queues go to the other members, each read on from the group's stored offset.

A new group starts at the end (RocketMQ's ConsumeInitMode.MAX). The token's consume grants
decide who may (auth.py): FORBIDDEN otherwise. Tag filters: `*`, `TagA || TagB`; SQL92
filters are UNSUPPORTED.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Collection, Iterator
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
    Received,
    Subscription,
    SubscriptionConflictError,
    UnackedLimitError,
)
from coordinator.rest.errors import ApiError
from coordinator.rest.in_flight import holder_of
from coordinator.rest.models import MAX_RECEIVE, ReceiveRequest, receive_request
from coordinator.rest.poll_slots import PollSlotsFullError
from coordinator.rocketmq.calls import Calls, client_id_of
from coordinator.rocketmq.codes import Code, RefusedError, ok, status
from coordinator.rocketmq.messages import delivered_message
from coordinator.rocketmq.push import PushClients, assignment_response, is_push

__all__ = ["ConsumerCalls", "member_of"]

#: Left of a long poll for the answer to travel: the client's deadline is its request
#: timeout past the long-polling timeout.
_ANSWER_MARGIN_SECONDS = 0.5
#: A push consumer's long poll is taken in slices this long: a member's receive holds the
#: member while it waits, and the client's other process queues read the same member.
_SLICE_SECONDS = 0.5
#: How long QueryAssignment waits for a new member's queues (the client's default request
#: timeout is 3 s; an empty answer is asked again 5 s later).
_JOIN_SECONDS = 2.0


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
    """ReceiveMessage, AckMessage, ChangeInvisibleDuration and QueryAssignment."""

    #: The consumer clients' subscriptions, from their Settings (push.py).
    clients: PushClients

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clients = PushClients()

    def QueryAssignment(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's name
        def query(who: Principal) -> Any:
            topic = self._topic(request.topic)
            group, member = self._member(request.group, request.topic, context, who)
            said = self.clients.of(client_id_of(context))
            expression = said.filters.get(topic) if said is not None else None
            body = self._body(
                topic,
                member,
                expression if expression is not None else pb.FilterExpression(),
                batch_size=1,
                wait=0.0,
                invisible=None,
            )
            deadline = time.monotonic() + _JOIN_SECONDS
            while True:  # take part in the group (joining if new), handing nothing out
                self._hand_out(group, member, body, who, wait=0.25, queues=())
                queues = self.services.consumers.assigned(group, member) or []
                if queues or time.monotonic() >= deadline:
                    break
            mine = [queue_id for name, queue_id in queues if name == topic]
            return assignment_response(topic, mine, request.endpoints)

        return self._call(context, service.QueryAssignmentResponse, query)

    def terminated(self, client_id: str, who: Principal) -> None:
        """Have `client_id`'s members leave their group (NotifyClientTermination): their
        queues go to the group's other members at once."""
        said = self.clients.forget(client_id)
        if said is None:
            return
        for topic in said.filters:
            try:
                require_consume(who, said.group, topic, ("group", "topic"))
            except ApiError:  # not its group: that member stays until idle
                continue
            self.services.consumers.leave(said.group, member_of(client_id, topic))

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
        topic = self._topic(request.message_queue.topic)
        group, member = self._member(request.group, request.message_queue.topic, context, who)
        max_wait = svc.config.rest.check_poll_max_wait.total_seconds()
        wait = _seconds(request.long_polling_timeout) - _ANSWER_MARGIN_SECONDS
        invisible = (
            _seconds(request.invisible_duration) if request.HasField("invisible_duration") else None
        )
        body = self._body(
            topic,
            member,
            request.filter_expression,
            batch_size=request.batch_size,
            wait=min(max(wait, 0.0), max_wait),
            invisible=invisible,
        )
        try:
            slot = svc.poll_slots.take(
                f"consumer-group:{group}", holder_of(who), label=f"consumer group {group!r}"
            )
        except PollSlotsFullError as exc:
            raise RefusedError(Code.TOO_MANY_REQUESTS, str(exc)) from exc
        try:
            if is_push(request):
                received = self._long_poll(
                    group, member, body, who, {(topic, request.message_queue.id)}
                )
            else:
                received = self._hand_out(
                    group, member, body, who, wait=body.wait_seconds, queues=None
                )
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

    def _body(
        self,
        topic: str,
        member: str,
        expression: Any,
        *,
        batch_size: int,
        wait: float,
        invisible: float | None,
    ) -> ReceiveRequest:
        """Return a receive as the REST ingress validates it (its defaults, its bounds)."""
        if expression.type not in (pb.FilterType.TAG, pb.FilterType.FILTER_TYPE_UNSPECIFIED):
            raise RefusedError(Code.UNSUPPORTED, "only TAG filter expressions are supported")
        max_wait = self.services.config.rest.check_poll_max_wait.total_seconds()
        raw: dict[str, Any] = {
            "topic": topic,
            "tag_expression": expression.expression or "*",
            "max_messages": min(batch_size or 1, MAX_RECEIVE),
            "wait_seconds": wait,
            "member": member,
        }
        if invisible is not None:
            raw["invisible_seconds"] = invisible
        try:
            body: ReceiveRequest = _receive_model(max_wait).model_validate(raw)
        except ValidationError as exc:
            field = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
            code = {
                "tag_expression": Code.ILLEGAL_FILTER_EXPRESSION,
                "invisible_seconds": Code.ILLEGAL_INVISIBLE_TIME,
            }.get(field, Code.BAD_REQUEST)
            raise RefusedError(code, str(exc.errors()[0]["msg"])) from None
        return body

    def _long_poll(
        self,
        group: str,
        member: str,
        body: ReceiveRequest,
        who: Principal,
        queues: Collection[tuple[str, int]],
    ) -> Received:
        """Receive from `queues` of the member, waiting up to the body's wait in slices: the
        member is free between them for the client's calls on its other queues."""
        deadline = time.monotonic() + body.wait_seconds
        while True:
            remaining = deadline - time.monotonic()
            wait = min(max(remaining, 0.0), _SLICE_SECONDS)
            received = self._hand_out(group, member, body, who, wait=wait, queues=queues)
            if received.messages or remaining <= _SLICE_SECONDS:
                return received

    def _hand_out(
        self,
        group: str,
        member: str,
        body: ReceiveRequest,
        who: Principal,
        *,
        wait: float,
        queues: Collection[tuple[str, int]] | None,
    ) -> Received:
        """One receive of the member (made and joined if new); refusals as RocketMQ Codes."""
        try:
            return self.services.consumers.receive(
                group,
                member,
                Subscription(body.topic, body.tag_expression, body.orderly),
                max_messages=body.max_messages,
                wait_seconds=wait,
                invisible_seconds=body.invisible_seconds,
                start_from=body.start_from,
                holder=holder_of(who),
                queues=queues,
            )
        except (ConsumersFullError, UnackedLimitError) as exc:
            raise RefusedError(Code.TOO_MANY_REQUESTS, str(exc)) from exc
        except SubscriptionConflictError as exc:
            raise RefusedError(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from exc
        except ConsumerUnavailableError as exc:
            raise RefusedError(
                Code.PROXY_TIMEOUT, "the committed messages cannot be read now; receive again"
            ) from exc


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
